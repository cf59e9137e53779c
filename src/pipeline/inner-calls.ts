/**
 * Inner model calls: the calls a plugin or a server tool makes on a request's behalf (fusion's
 * panel and judge). Each is routed like a request of its own (Router.plan), run through the turn
 * runner (failover before the first byte, as for the request), read whole, charged to the
 * request's key and recorded as a generation whose `parent_generation_id` is the request's.
 *
 * Money: each call holds its own worst case against the key before it runs (a 402 is the call's
 * failure, not the request's) and the ledger row that records it settles that hold, as finish.ts
 * does for a request; its cost is on its own record, never again on the parent's.
 *
 * Inner calls never carry plugins or the outer request's tools: an inner call cannot call fusion. A
 * fusion panelist's call may offer web tools as function tools (src/tools/panel.ts): the calls it makes come
 * back in `toolCalls`, and panel.ts runs them.
 */
import { Effect, Either, Exit, Option, type Types } from "effect"
import type { Settings } from "../config/Config.js"
import type { ApiError } from "../domain/errors.js"
import { type GenerationEntry, newGenerationId, type PreviousError } from "../domain/generations.js"
import { costOf, type Usage } from "../domain/pricing.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { Encoder } from "../formats/format.js"
import { responsesFormat } from "../formats/responses/index.js"
import { chargedUsage, generationRecord, NO_USAGE, storedContent, targetOf } from "./record.js"
import { asProviderError } from "./upstream-errors.js"
import { moneyOf } from "./money.js"
import { DeadlineExceeded, statusOfFailure, turnRunnerFor } from "./turns.js"
import type { Attempt } from "./finish.js"
import { PlainAbort } from "../providers/abort.js"
import type { ProviderError, ProviderEvent, UpstreamCall } from "../providers/types.js"
import type { Router } from "../routing/Router.js"
import type { Endpoint } from "../services/Catalog.js"
import type { GenerationStore } from "../services/GenerationStore.js"
import type { Reservation, Spend } from "../services/Spend.js"
import type { InnerCallResult, InnerCalls, InnerToolCall, ParentCall } from "../tools/inner-calls.js"

export interface InnerCallDeps {
  readonly settings: Settings
  readonly router: Router
  readonly generationStore: GenerationStore
  readonly spend: Spend
}

const failed = (model: string, error: string, status: number, cost = 0, generationId?: string): InnerCallResult => ({
  ok: false,
  model,
  error,
  status,
  cost,
  generationId,
})

/**
 * An inner call's answer read whole into `assembler` (finished), with the function calls the model
 * made (a panelist's web tools) and when its first token came; `error`: it failed part way.
 */
const readWhole = async (
  call: UpstreamCall,
  assembler: Encoder,
): Promise<{ readonly firstTokenAt: number | undefined; readonly toolCalls: Map<number, Types.Mutable<InnerToolCall>>; readonly error?: ProviderError }> => {
  let firstTokenAt: number | undefined
  const toolCalls = new Map<number, Types.Mutable<InnerToolCall>>()
  const read = (batch: ReadonlyArray<ProviderEvent>) => {
    for (const e of batch) {
      if (e.type === "tool_call_start") {
        if (!toolCalls.has(e.index)) toolCalls.set(e.index, { callId: e.callId, name: e.name, arguments: "" })
      } else if (e.type === "tool_call_delta") {
        const toolCall = toolCalls.get(e.index)
        if (toolCall !== undefined) toolCall.arguments += e.delta
      }
    }
    assembler.push(batch)
  }
  try {
    if (call.whole !== undefined) {
      firstTokenAt = Date.now()
      read(call.whole)
    } else {
      for await (const batch of call.events) {
        firstTokenAt ??= Date.now()
        read(batch)
      }
    }
    assembler.finish()
    return { firstTokenAt, toolCalls }
  } catch (e) {
    return { firstTokenAt, toolCalls, error: asProviderError(e) }
  }
}

export const makeInnerCalls = (deps: InnerCallDeps): InnerCalls => {
  const { settings, router, generationStore, spend } = deps
  const turns = turnRunnerFor(settings, router)

  /** Records the call and settles its hold with the same ledger row (as finish.ts does); resolves once handed over. */
  const recordAndSettle = async (entry: GenerationEntry, held: Option.Option<Reservation>, actualUsd: number) => {
    if (Option.isNone(held)) {
      generationStore.recordSync(entry)
      return
    }
    if (generationStore.recordSettled(entry, { ...held.value, actualUsd }, () => undefined)) return
    await Effect.runPromise(spend.settle(held.value, actualUsd))
  }

  const call = async (original: ResponsesRequest, model: string, parent: ParentCall): Promise<InnerCallResult> => {
    if (original.plugins?.some((p) => p.id === "fusion" && p.enabled !== false) === true) {
      return failed(model, "an inner call cannot call fusion", 400)
    }
    const budget = parent.budget
    if (budget.used >= budget.max) {
      return failed(model, `the request made its ${budget.max} model calls (server.max_upstream_calls)`, 429)
    }
    if (parent.signal.aborted) return failed(model, "the request was cancelled", 499)
    // Never streamed, never with plugins or tools of the outer request.
    const request: ResponsesRequest = { ...original, model, models: undefined, stream: false, plugins: undefined }
    const plan = router.plan({
      request,
      userId: parent.principal.userId,
      sessionKey: null,
    })
    if (Either.isLeft(plan)) return failed(model, plan.left.message, plan.left.status)
    const money = moneyOf(JSON.stringify(request), request, "", plan.right, settings)
    const key = parent.principal.key
    const isByok = money.allByok
    let held: Option.Option<Reservation> = Option.none()
    if (spend.holds(key, { isByok })) {
      const reserved = await Effect.runPromiseExit(spend.reserve(key, money.worstCase, { isByok }))
      if (Exit.isFailure(reserved)) {
        const refusal = reserved.cause._tag === "Fail" ? (reserved.cause.error as ApiError) : undefined
        return failed(model, refusal?.message ?? "the key's budget could not be held", refusal?.status ?? 402)
      }
      held = reserved.value
    }
    budget.used++

    const startedAt = Date.now()
    const generationId = newGenerationId(startedAt)
    const upstreamAbort = new PlainAbort()
    // The parent's deadline (ours, or an AbortSignal.timeout's) ends the call as a deadline; anything else as the client leaving.
    const onAbort = () => {
      const reason: unknown = parent.signal.reason
      const deadline = reason instanceof DeadlineExceeded || (reason instanceof DOMException && reason.name === "TimeoutError")
      upstreamAbort.abort(deadline ? new DeadlineExceeded() : new Error("client disconnected"))
    }
    parent.signal.addEventListener("abort", onAbort, { once: true })
    const attempts: Array<Attempt> = []
    /** The call's record: the request's generation is its parent; never broadcast on its own. */
    const recordOf = (
      endpoint: Endpoint,
      status: GenerationEntry["status"],
      error: { readonly message: string; readonly status: number; readonly previousErrors?: ReadonlyArray<PreviousError> } | undefined,
      answer?: { readonly usage: Usage; readonly cost: number; readonly assembler: Encoder; readonly firstTokenAt: number | undefined },
    ): GenerationEntry => {
      const row = generationRecord({
        id: generationId,
        owner: parent.principal,
        sessionId: parent.sessionId,
        startedAt,
        endedAt: Date.now(),
        streamed: false,
        target: targetOf(endpoint),
        status,
        usage: answer?.usage ?? NO_USAGE,
        cost: answer?.cost ?? 0,
        finishReason: answer?.assembler.finishReason ?? null,
        firstTokenAt: answer?.firstTokenAt,
        usageEstimated: answer === undefined ? undefined : answer.assembler.usage === undefined,
        error,
      })
      row.parentGenerationId = parent.generationId
      if (answer !== undefined && parent.storeContent) row.content = storedContent(request, answer.assembler)
      return row
    }
    try {
      const turn = await turns.runTurn(request, plan.right, { streaming: false, upstreamAbort, trace: undefined, startedAt, attempts })
      if (turn.refused !== undefined) {
        const { endpoint, error } = turn.outcome
        // The record's status and message (499 when the request was cancelled), as finish.ts records a request's.
        const status = error?.status ?? turn.refused.status
        const message = error?.message ?? turn.refused.message
        if (endpoint !== undefined) {
          const entry = recordOf(endpoint, turn.outcome.status, { message, status, previousErrors: error?.previousErrors })
          await recordAndSettle(entry, held, 0)
          return failed(model, message, status, 0, generationId)
        }
        if (Option.isSome(held)) await Effect.runPromise(spend.settle(held.value, 0))
        return failed(model, message, status)
      }
      const endpoint = turn.endpoint
      const assembler = responsesFormat.encoder(request, { stream: false, model: endpoint.modelId })
      const read = await readWhole(turn.call, assembler)
      const { firstTokenAt, toolCalls } = read
      let failure: { readonly message: string; readonly status: number } | undefined
      if (read.error !== undefined) {
        if (!upstreamAbort.signal.aborted) router.recordFailure(endpoint, read.error.kind)
        failure = { message: read.error.message, status: statusOfFailure(read.error) }
      } else if (assembler.status === "failed") failure = { message: `Provider ${endpoint.provider.id} ended the answer with an error`, status: 502 }
      // Charged as a request is (finish.ts): the upstream's usage, or the estimate of what came, within the bounds held.
      const usage = chargedUsage({ request, estimatedInputTokens: money.estimatedInputTokens, promptBound: money.promptBound }, endpoint, assembler)
      const cost = Math.max(0, costOf(endpoint.pricing, usage))
      const countsForKey = !endpoint.isByok || key.include_byok_in_limit === 1
      const cancelled = upstreamAbort.signal.aborted && !(upstreamAbort.signal.reason instanceof DeadlineExceeded)
      const status = failure !== undefined ? (cancelled ? "cancelled" : "failed") : assembler.status === "incomplete" ? "incomplete" : "completed"
      const entry = recordOf(endpoint, status, failure, { usage, cost, assembler, firstTokenAt })
      await recordAndSettle(entry, held, countsForKey ? cost : 0)
      if (failure !== undefined) return failed(model, failure.message, failure.status, cost, generationId)
      router.recordSuccess(plan.right, endpoint, {
        ttftMs: firstTokenAt === undefined ? undefined : firstTokenAt - turn.attemptStartedAt,
        outputTokens: usage.outputTokens,
        generationMs: Date.now() - turn.attemptStartedAt,
      })
      return {
        ok: true,
        model,
        text: assembler.completionText,
        usage,
        cost,
        endpoint,
        generationId,
        finishReason: assembler.finishReason ?? null,
        ...(toolCalls.size === 0 ? {} : { toolCalls: [...toolCalls.values()] }),
      }
    } finally {
      parent.signal.removeEventListener("abort", onAbort)
    }
  }

  return { call }
}
