/** The `ProviderEvent`s an adapter emits (src/providers/types.ts), for the tests that drive an encoder with them. */
import type { Usage } from "../../src/domain/pricing.js"
import type { FinishReason, ProviderEvent } from "../../src/providers/types.js"

export const text = (delta: string): ProviderEvent => ({ type: "text", delta })
export const thinking = (delta: string): ProviderEvent => ({ type: "reasoning", delta })
export const callStart = (index: number, callId: string, name: string): ProviderEvent => ({ type: "tool_call_start", index, callId, name })
export const callDelta = (index: number, delta: string): ProviderEvent => ({ type: "tool_call_delta", index, delta })
export const finishWith = (reason: FinishReason): ProviderEvent => ({ type: "finish", reason })
export const usageOf = (usage: Usage): ProviderEvent => ({ type: "usage", usage })
