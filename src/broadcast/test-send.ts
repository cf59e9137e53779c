/**
 * The made-up generation a destination's test send carries (`POST /v1/destinations/{id}/test`,
 * docs/broadcast.md): one token in and one out, no cost, "ping" and "pong", under the test key
 * hash of zeros, so a receiver shows it beside real traffic without being mistaken for it.
 */
import type { DeliveryContent, DeliveryPayload } from "./payload.js"

export const testGeneration = (userId: string, workspaceId: string, now: number): { readonly payload: DeliveryPayload; readonly content: DeliveryContent } => ({
  payload: {
    id: `gen-test-${Math.floor(now / 1000)}-${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`,
    keyHash: "0".repeat(64),
    ownerId: userId,
    workspaceId,
    model: "gateway/test",
    provider: "gateway",
    upstreamModel: "test",
    createdAt: new Date(now).toISOString(),
    generationTimeMs: 1,
    latencyMs: 1,
    streamed: false,
    status: "completed",
    finishReason: "stop",
    sessionId: null,
    user: null,
    inputTokens: 1,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: 1,
    reasoningTokens: 0,
    totalCost: 0,
    isByok: false,
    error: null,
    trace: { trace_name: "gateway destination test" },
    attempts: [],
    params: {},
    strategy: null,
    plugins: [],
    pricing: null,
  },
  content: { input: [{ role: "user", content: "ping" }], output: "pong", reasoning: null },
})
