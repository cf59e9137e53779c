/**
 * What a plugin or a server tool may ask of inner model calls (fusion's panel and judge): the
 * contract only. The pipeline runs them (src/pipeline/inner-calls.ts: routed, run through the turn
 * runner, charged and recorded as a child generation) and hands them down as `InnerCalls`.
 */
import type { Usage } from "../domain/pricing.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { PrincipalShape } from "../services/Auth.js"
import type { Endpoint } from "../services/Catalog.js"

/**
 * The request's model calls so far, against its cap (`server.max_upstream_calls` once the loop
 * has it): one object per request, shared by the loop, the plugins and the tools.
 */
export interface UpstreamCallBudget {
  /** Model calls made so far (each inner call counts one, whatever its failovers). */
  used: number
  readonly max: number
}

/** The request an inner call is made for. */
export interface ParentCall {
  /** The request's generation id: each inner record's `parent_generation_id`. */
  readonly generationId: string
  readonly principal: PrincipalShape
  readonly sessionId: string | null
  /** The workspace logs content: the inner records keep theirs too. */
  readonly storeContent: boolean
  /** Aborted when the client goes away or the request's deadline passes. */
  readonly signal: AbortSignal
  readonly budget: UpstreamCallBudget
}

/** A function call an inner call's model made: its id, the function's name and its arguments (JSON text). */
export interface InnerToolCall {
  readonly callId: string
  readonly name: string
  readonly arguments: string
}

/** What one inner call gave. */
export type InnerCallResult =
  | {
      readonly ok: true
      readonly model: string
      readonly text: string
      readonly usage: Usage
      /** USD, at the answering endpoint's price (charged with its record). */
      readonly cost: number
      readonly endpoint: Endpoint
      readonly generationId: string
      readonly finishReason: string | null
      /** The function calls the model made (a panelist offered server tools as functions); absent or empty: none. */
      readonly toolCalls?: ReadonlyArray<InnerToolCall>
    }
  | {
      readonly ok: false
      readonly model: string
      readonly error: string
      /** The HTTP status the call failed with (e.g. 402, 429, 502). */
      readonly status: number
      /** USD charged for it (a call cut after its answer began); 0 when nothing came. */
      readonly cost: number
      readonly generationId: string | undefined
    }

export interface InnerCalls {
  /** Runs `request` (non-streaming; its `model` is replaced by `model`) for `parent`. Never rejects. */
  readonly call: (request: ResponsesRequest, model: string, parent: ParentCall) => Promise<InnerCallResult>
}
