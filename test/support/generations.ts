/** A generation record for ledger tests: a completed, non-BYOK call costing $0.001, with fresh id. */
import { type GenerationEntry, newGenerationId } from "../../src/domain/generations.js"

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
