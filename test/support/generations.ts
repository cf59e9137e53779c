/** Generation records for ledger tests, and what broadcast delivers of one. */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { DeliveryPayload } from "../../src/broadcast/payload.js"
import { type GenerationEntry, newGenerationId } from "../../src/domain/generations.js"
import type { RunningServer } from "../../src/http/server.js"

/** The ledger's rows of one key as stored (status, cancellation, cost, time), read through a started gateway. */
export const ledgerRowsOf = (server: Pick<RunningServer, "runtime">, keyHash: string) =>
  server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      return yield* sql<{ status: string; cancelled: number; total_cost_nano: number; generation_time_ms: number }>`SELECT status,
        cancelled, total_cost_nano, generation_time_ms FROM generations WHERE key_hash = ${keyHash}`
    }),
  )

/** A generation record: a completed, non-BYOK call costing $0.001, with fresh id. */
export const generationEntry = (overrides: Partial<GenerationEntry> = {}): GenerationEntry => ({
  id: newGenerationId(),
  keyHash: "k".repeat(64),
  userId: "user_gen",
  workspaceId: "ws_gen",
  model: "demo/echo",
  providerName: "fake",
  upstreamModel: "echo-1",
  createdAt: new Date().toISOString(),
  streamed: false,
  cancelled: false,
  finishReason: "stop",
  sessionId: null,
  inputTokens: 10,
  cachedTokens: 2,
  cacheWriteTokens: 1,
  outputTokens: 5,
  reasoningTokens: 3,
  totalCost: 0.001,
  isByok: false,
  generationTimeMs: 120,
  latencyMs: 40,
  status: "completed",
  ...overrides,
})

/** What broadcast delivers of a generation (src/broadcast/payload.ts): a completed, non-BYOK call with no trace, error or extras. */
export const deliveryPayload = (overrides: Partial<DeliveryPayload> = {}): DeliveryPayload => ({
  id: "gen-1700000000-abcdefghijklmnopqrst",
  keyHash: "ab".repeat(32),
  ownerId: "user-1",
  workspaceId: "ws-1",
  model: "demo/free",
  provider: "demo",
  upstreamModel: "free-1",
  createdAt: "2026-11-29T10:00:00.123Z",
  generationTimeMs: 250,
  latencyMs: 40,
  streamed: false,
  status: "completed",
  finishReason: "stop",
  sessionId: null,
  user: null,
  inputTokens: 12,
  cachedTokens: 0,
  cacheWriteTokens: 0,
  outputTokens: 30,
  reasoningTokens: 0,
  totalCost: 0.000123,
  isByok: false,
  error: null,
  trace: null,
  attempts: [],
  params: {},
  strategy: null,
  plugins: [],
  pricing: null,
  ...overrides,
})
