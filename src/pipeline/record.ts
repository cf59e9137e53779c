/**
 * The one builder of a generation's record, and of what it is charged for. A request's own answer
 * (finish.ts), a model call made on its behalf (inner-calls.ts: fusion's panel and judge) and a
 * refusal that keeps its record (route.ts: a moderation block, stages stopped by the deadline or
 * the client) all make their rows here, so the three agree field by field. Callers add what only
 * they know (the client's headers, broadcast's references, stored content, the parent's id).
 */
import type { Types } from "effect"
import type { GenerationContent, GenerationEntry, GenerationStatus, PreviousError } from "../domain/generations.js"
import { capUsage, estimateTokens, type Usage } from "../domain/pricing.js"
import type { ResponsesRequest } from "../domain/responses.js"
import { isoTime } from "../domain/time.js"
import type { Encoder } from "../formats/format.js"
import type { Endpoint } from "../services/Catalog.js"
import { inputBound, outputBound } from "./bounds.js"
import { storedInput } from "./content.js"

/** Whose generation it is: the key's hash and owners. */
export interface RecordOwner {
  readonly hash: string
  readonly userId: string
  readonly workspaceId: string
}

/** What answered (or would have): the model asked for, the provider and its own model id. */
export interface RecordTarget {
  readonly model: string
  readonly providerName: string
  readonly upstreamModel: string
  readonly isByok: boolean
}

export const targetOf = (endpoint: Endpoint): RecordTarget => ({
  model: endpoint.modelId,
  providerName: endpoint.provider.id,
  upstreamModel: endpoint.upstreamModel,
  isByok: endpoint.isByok,
})

export interface RecordFields {
  readonly id: string
  readonly owner: RecordOwner
  readonly sessionId: string | null
  /** Unix ms the request (or inner call) started, and ended. */
  readonly startedAt: number
  readonly endedAt: number
  readonly streamed: boolean
  readonly target: RecordTarget
  readonly status: GenerationStatus
  readonly usage: Usage
  /** USD, also the ledger's spend for this generation. */
  readonly cost: number
  readonly finishReason: string | null
  /** Unix ms of the first token; undefined when none came. */
  readonly firstTokenAt: number | undefined
  /** The usage is the gateway's estimate (the upstream gave none it could trust). */
  readonly usageEstimated?: boolean
  readonly error: { readonly message: string; readonly status: number; readonly previousErrors?: ReadonlyArray<PreviousError> } | undefined
}

/** A generation's record. Fields are assigned, not spread: this runs once per request. */
export const generationRecord = (f: RecordFields): Types.Mutable<GenerationEntry> => {
  const { target, usage } = f
  const row: Types.Mutable<GenerationEntry> = {
    id: f.id,
    keyHash: f.owner.hash,
    userId: f.owner.userId,
    workspaceId: f.owner.workspaceId,
    model: target.model,
    providerName: target.providerName,
    upstreamModel: target.upstreamModel,
    createdAt: isoTime(f.startedAt),
    streamed: f.streamed,
    cancelled: f.status === "cancelled",
    finishReason: f.finishReason,
    sessionId: f.sessionId,
    inputTokens: usage.inputTokens,
    cachedTokens: usage.cachedTokens,
    cacheWriteTokens: usage.cacheWriteTokens,
    outputTokens: usage.outputTokens,
    reasoningTokens: usage.reasoningTokens,
    totalCost: f.cost,
    isByok: target.isByok,
    generationTimeMs: Math.round(f.endedAt - f.startedAt),
    latencyMs: f.firstTokenAt === undefined ? null : Math.round(f.firstTokenAt - f.startedAt),
    status: f.status,
  }
  if (f.usageEstimated !== undefined) row.usageEstimated = f.usageEstimated
  if (f.error !== undefined) {
    const error: Types.Mutable<NonNullable<GenerationEntry["error"]>> = {
      message: f.error.message,
      status: f.error.status,
      providerName: target.providerName,
    }
    if (f.error.previousErrors !== undefined) error.previousErrors = f.error.previousErrors
    row.error = error
  }
  return row
}

/** What a workspace that logs content keeps of an answer: the input as stored, the completion and the reasoning (null when none). */
export const storedContent = (request: ResponsesRequest, assembler: Encoder | undefined): GenerationContent => ({
  input: storedInput(request),
  output: {
    completion: assembler?.completionText ?? null,
    reasoning: assembler !== undefined && assembler.reasoningText !== "" ? assembler.reasoningText : null,
  },
})

export const NO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

/** What bounds a request's charge: the estimate of its input and the bounds it was reserved for. */
export interface ChargeBounds {
  readonly request: ResponsesRequest
  readonly estimatedInputTokens: number
  readonly promptBound: number
}

/**
 * What a request is charged for on `endpoint`: the upstream's usage (the estimate of what was
 * produced when it gave none, or counts that are not counts), never past the bounds it was
 * reserved for, so a key is never charged more than its reservation.
 */
export const chargedUsage = (bounds: ChargeBounds, endpoint: Endpoint, assembler: Encoder | undefined): Usage =>
  boundedUsage(bounds, endpoint, assembler?.usage, (assembler?.completionText.length ?? 0) + (assembler?.reasoningText.length ?? 0))

/** `chargedUsage` of a turn that reported `reported` (undefined: none to trust) and produced `producedChars` characters. */
export const boundedUsage = (bounds: ChargeBounds, endpoint: Endpoint, reported: Usage | undefined, producedChars: number): Usage => {
  // No usage from upstream (aborted or failed mid-way, or untrustworthy): the estimate of what was produced.
  const usage = reported ?? {
    inputTokens: bounds.estimatedInputTokens,
    cachedTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: producedChars === 0 ? 0 : estimateTokens(producedChars),
    reasoningTokens: 0,
  }
  return capUsage(usage, inputBound(bounds.promptBound, endpoint), outputBound(bounds.request, endpoint).total)
}
