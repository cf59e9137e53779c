/**
 * The server-tool loop (docs/server-tools.md): a request that declares server tools (src/tools/declare.ts)
 * runs turns until the model answers. Each turn offers the server tools as function tools; when
 * the model calls one, the loop runs it (`ServerTool.run`), appends the call and its output to the
 * conversation and calls the model again. A call to one of the client's own function tools ends
 * the loop and goes back as today. The budget: `max_tool_calls` server-tool calls (30 at most),
 * `stop_server_tools_when`, `server.max_upstream_calls` model calls, and the key's limit (each
 * later turn holds its worst case before it runs); when it ends, one last turn runs with
 * `tool_choice: "none"` so the answer ends in text.
 *
 * One encoder for the whole loop: one response id, `output_index` continuing across turns, each
 * server-tool call its own output item, added before the tool runs and done after it, with the
 * tool's progress events between as they happen (formats without such items show only the text).
 * A streamed loop sends keep-alive comments whenever it was quiet for `streamKeepAliveMs`. Only
 * requests with server tools come here (route.ts: one check); the relay is plain code over the
 * turn's batches, not the optimized single-turn relay of egress.ts.
 */
import { Effect, Either, Option, type Types } from "effect"
import type { Settings } from "../config/Config.js"
import { type ApiError, RequestTimeout } from "../domain/errors.js"
import { capUsage, costOf, estimateTokens, isValidUsage, type PartAllowance, type Usage } from "../domain/pricing.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { PlainAbort } from "../providers/abort.js"
import type { FinishReason, ProviderEvent } from "../providers/types.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import type { Endpoint } from "../services/Catalog.js"
import type { Reservation, Spend } from "../services/Spend.js"
import { inputBound, outputBound } from "./bounds.js"
import type { RequestTrace } from "./trace.js"
import { KEEP_ALIVE, keepAliveDue, startKeepAlive } from "../formats/sse.js"
import { apiErrorOf, asProviderError, failureCodeOf } from "./upstream-errors.js"
import { serverToolTypeOf, type ServerToolPlan } from "../tools/declare.js"
import type { DeclaredTool, ModelCallingContext, ServerTool, ServerToolContext, ServerToolProgressEvent, ServerToolResult } from "../tools/types.js"
import type { InnerCalls, UpstreamCallBudget } from "../tools/inner-calls.js"
import type { Attempt, Finish, Outcome, RequestLife } from "./finish.js"
import { after } from "./egress.js"
import { type ClientFormat, errorResponseIn, type FinishExtras, notRecorded, type ServerToolUse, storeFailureEvent } from "../formats/format.js"
import type { RequestLifecycle } from "./lifecycle.js"
import { moneyOf } from "./money.js"
import { DeadlineExceeded, statusOfFailure, type TurnOptions, type TurnResult } from "./turns.js"

/** The default of `server.max_upstream_calls`: model calls one request may make in all. */
export const DEFAULT_MAX_UPSTREAM_CALLS = 64

/** What the loop needs of the route for one request. */
export interface LoopRequest {
  readonly format: ClientFormat
  readonly life: RequestLife
  readonly plan: RoutePlan
  readonly streaming: boolean
  readonly upstreamAbort: PlainAbort
  readonly attempts: Array<Attempt>
  readonly trace: RequestTrace | undefined
  readonly idHeader: Record<string, string>
  /** Clears the request's deadline and its client-abort handler. */
  readonly cleanup: () => void
  readonly serviceMetadata: (selected: Endpoint | undefined) => Record<string, unknown>
}

export interface LoopDeps {
  readonly settings: Settings
  readonly parts: PartAllowance
  readonly router: Router
  readonly finish: Finish
  readonly lifecycle: RequestLifecycle
  readonly spend: Spend
  readonly runPromise: <A, E>(effect: Effect.Effect<A, E, never>) => Promise<A>
  readonly runTurn: (request: ResponsesRequest, plan: RoutePlan, options: TurnOptions) => Promise<TurnResult>
  readonly deadlineMessage: string
  readonly shutdownMessage: string
  /** Model calls a tool makes on the request's behalf (fusion's panel and judge); absent: such a tool fails its call. */
  readonly innerCalls?: InnerCalls
}

type InputItems = Exclude<ResponsesRequest["input"], string | undefined>
type Tools = NonNullable<ResponsesRequest["tools"]>

/** The request's conversation as items (a string input is one user message). */
const inputItemsOf = (request: ResponsesRequest): InputItems => {
  const input = request.input
  if (input === undefined) return []
  if (typeof input === "string") return [{ type: "message", role: "user", content: input }]
  return input
}

/** The client's tools without the server tools' entries, then the server tools as function tools. */
const offeredTools = (request: ResponsesRequest, plan: ServerToolPlan): Tools => {
  const tools: Array<Tools[number]> = []
  for (const tool of request.tools ?? []) if (tool.type === "function" || serverToolTypeOf(tool.type) === undefined) tools.push(tool)
  for (const { tool } of plan.tools) {
    tools.push({ type: "function", name: tool.name, description: tool.description, parameters: tool.parameters as Record<string, unknown> })
  }
  return tools
}

const addUsage = (a: Usage, b: Usage): Usage => ({
  inputTokens: a.inputTokens + b.inputTokens,
  cachedTokens: a.cachedTokens + b.cachedTokens,
  cacheWriteTokens: a.cacheWriteTokens + b.cacheWriteTokens,
  outputTokens: a.outputTokens + b.outputTokens,
  reasoningTokens: a.reasoningTokens + b.reasoningTokens,
})

const NO_USAGE: Usage = { inputTokens: 0, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 0, reasoningTokens: 0 }

/**
 * `openai`'s JS stream helper (`responses.stream()`) throws on an event type its accumulator does
 * not know (`assertNever`), such as the official SDK's `response.fusion_call.*`. To that client
 * (User-Agent `OpenAI/JS …`) only the progress events of OpenAI's own stream are sent (the tool says).
 */
const progressEventsFor = (tool: ServerTool, userAgent: string | null): string | undefined =>
  tool.eventPrefix !== undefined && userAgent?.includes("OpenAI/JS") === true && tool.openaiProgress !== true ? undefined : tool.eventPrefix

/** A server-tool call the model made in one turn. */
interface ServerCall {
  readonly callId: string
  readonly declared: DeclaredTool
  args: string
}

/** How a turn's reading ended. */
type Read = { readonly ok: true } | { readonly ok: false; readonly cause: unknown }

export const makeToolLoop = (deps: LoopDeps) => {
  const { settings, parts, router, finish, lifecycle, spend, runPromise, runTurn, deadlineMessage, shutdownMessage, innerCalls } = deps
  const maxUpstreamCalls = settings.catalog.server?.max_upstream_calls ?? DEFAULT_MAX_UPSTREAM_CALLS
  const keepAliveMs = settings.streamKeepAliveMs

  /** Holds `usd` more against the key for a later turn: the hold, none needed, or refused. */
  const holdMore = async (life: RequestLife, usd: number): Promise<Reservation | "none" | "refused"> => {
    const { principal, allByok } = life.prepared
    if (!spend.holds(principal.key, { isByok: allByok })) return "none"
    const held = await runPromise(Effect.either(spend.reserve(principal.key, usd, { isByok: allByok })))
    if (Either.isLeft(held)) return "refused"
    return Option.isSome(held.right) ? held.right.value : "none"
  }

  const respond = async (r: LoopRequest): Promise<Response> => {
    const { format, life, plan, streaming, upstreamAbort, attempts, trace, idHeader, cleanup } = r
    const prepared = life.prepared
    const toolPlan = prepared.serverTools as ServerToolPlan
    const request = prepared.request
    const byName = new Map<string, DeclaredTool>(toolPlan.tools.map((d) => [d.tool.name, d]))
    const tools = offeredTools(request, toolPlan)
    const conversation: Array<InputItems[number]> = [...inputItemsOf(request)]
    const turnRequest = (final: boolean): ResponsesRequest => {
      const turn: Types.Mutable<ResponsesRequest> = { ...request, input: conversation.slice(), tools }
      // Tools stay declared (the conversation names them) but the model may not call one.
      if (final) turn.tool_choice = "none"
      return turn
    }
    const withTools = (fitted: ResponsesRequest | undefined): ResponsesRequest | undefined =>
      fitted === undefined ? undefined : { ...fitted, tools }
    // Tools are told to stop when the request ends (client gone, deadline, shutdown).
    const toolAbort = new AbortController()
    // The model calls the tools (fusion's panel and judge) and the stages (the fusion plugin) made
    // themselves: they count with the turns' attempts.
    let innerCallsMade = prepared.upstreamCalls
    const onAbort = () => toolAbort.abort(upstreamAbort.reason)
    upstreamAbort.addEventListener("abort", onAbort)

    // The first turn: failover before the first byte, refusals in the format's envelope, as today.
    const firstRequest = turnRequest(false)
    const first = await runTurn(firstRequest, plan, {
      streaming,
      upstreamAbort,
      trace,
      startedAt: life.startedAt,
      attempts,
      // A failover candidate's compressed prompt (context-compression), with the server tools offered as functions.
      fitFor: prepared.fitFor === undefined ? undefined : (e) => withTools(prepared.fitFor?.(e)),
    })
    if (first.refused !== undefined) {
      cleanup()
      upstreamAbort.removeEventListener("abort", onAbort)
      finish(life, streaming, first.outcome)
      return errorResponseIn(format, first.refused, idHeader)
    }
    const encoder = format.encoder(request, {
      stream: streaming,
      model: first.endpoint.modelId,
      provider: first.endpoint.provider.id,
      annotations: prepared.annotations,
    })
    if (prepared.citable !== undefined) encoder.cite?.(prepared.citable)

    // What the loop has used so far.
    let endpoint: Endpoint = first.endpoint
    let usage: Usage = NO_USAGE
    let modelCost = 0
    let toolCost = 0
    // Tool costs not yet held against the key: the next turn's hold covers them.
    let unheldToolCost = 0
    const extraHolds: Array<Reservation> = []
    const use: Types.Mutable<ServerToolUse> = { tool_calls_requested: 0, tool_calls_executed: 0, web_search_requests: 0 }
    const callsOf = new Map<string, number>()
    // For the record: null until a tool reports one.
    let numSearchResults: number | null = null
    let numFetches: number | null = null
    let webSearchEngine: string | null = null
    let firstTokenAt: number | undefined
    let shuttingDown = false

    let write: (text: string | Uint8Array) => void = () => undefined

    /** The answer's end: settle and record once, with the loop's sums. */
    const end = (status: Outcome["status"], error?: Outcome["error"]) => {
      cleanup()
      upstreamAbort.removeEventListener("abort", onAbort)
      const outcome: Types.Mutable<Outcome> = {
        endpoint,
        assembler: encoder,
        status,
        firstTokenAt,
        charged: { usage, cost: modelCost + toolCost },
      }
      if (error !== undefined) outcome.error = error
      if (extraHolds.length > 0) outcome.extraHolds = extraHolds
      if (numSearchResults !== null || numFetches !== null || webSearchEngine !== null) {
        outcome.serverTools = { numSearchResults, numFetches, webSearchEngine }
      }
      return finish(life, streaming, outcome)
    }

    const finishExtras = (incompleteReason?: string): FinishExtras => {
      const extras: Types.Mutable<FinishExtras> = {
        usage,
        cost: modelCost + toolCost + prepared.spentUsd,
        isByok: endpoint.isByok,
        serverToolUse: use,
      }
      if (incompleteReason !== undefined) extras.incompleteReason = incompleteReason
      if (prepared.withMetadata) {
        extras.serviceMetadata = r.serviceMetadata(endpoint)
        if (prepared.metadataAlias) extras.metadataAlias = true
      }
      return extras
    }

    /** Reads one turn into the encoder; server-tool calls, usage and the finish reason are kept back. */
    const readTurn = async (
      turn: Extract<TurnResult, { call: unknown }>,
      calls: Map<number, ServerCall>,
      seen: { clientCalled: boolean; usage: Usage | undefined; reason: FinishReason | undefined },
    ): Promise<Read> => {
      const relay = (events: ReadonlyArray<ProviderEvent>) => {
        if (firstTokenAt === undefined) {
          firstTokenAt = Date.now()
          trace?.markFirstToken()
        }
        const kept: Array<ProviderEvent> = []
        for (const e of events) {
          switch (e.type) {
            case "tool_call_start": {
              const declared = byName.get(e.name)
              if (declared === undefined) {
                seen.clientCalled = true
                kept.push(e)
              } else if (!calls.has(e.index)) calls.set(e.index, { callId: e.callId, declared, args: "" })
              break
            }
            case "tool_call_delta": {
              const call = calls.get(e.index)
              if (call === undefined) kept.push(e)
              else call.args += e.delta
              break
            }
            case "usage":
              seen.usage = isValidUsage(e.usage) ? e.usage : undefined
              break
            case "finish":
              seen.reason = e.reason
              break
            default:
              kept.push(e)
          }
        }
        if (kept.length > 0) write(encoder.push(kept))
      }
      try {
        if (turn.call.whole !== undefined) relay(turn.call.whole)
        else for await (const batch of turn.call.events) relay(batch)
        return { ok: true }
      } catch (cause) {
        return { ok: false, cause }
      }
    }

    /** A turn's usage within what was held for it, at its endpoint's price, added to the sums. */
    const charge = (turn: { endpoint: Endpoint; request: ResponsesRequest; promptBound: number; estimatedInput: number }, reported: Usage | undefined, producedChars: number) => {
      const raw = reported ?? {
        inputTokens: turn.estimatedInput,
        cachedTokens: 0,
        cacheWriteTokens: 0,
        outputTokens: producedChars === 0 ? 0 : estimateTokens(producedChars),
        reasoningTokens: 0,
      }
      const charged = capUsage(raw, inputBound(turn.promptBound, turn.endpoint), outputBound(turn.request, turn.endpoint).total)
      usage = addUsage(usage, charged)
      modelCost += Math.max(0, costOf(turn.endpoint.pricing, charged))
    }

    /** Runs one server-tool call; the model's output for it. Never throws. */
    const runCall = async (call: ServerCall): Promise<string> => {
      const { tool, parameters } = call.declared
      let args: unknown
      try {
        args = call.args.trim() === "" ? {} : JSON.parse(call.args)
      } catch {
        return JSON.stringify({ status: "failed", error: "the call's arguments are not valid JSON" })
      }
      const callsSoFar = callsOf.get(tool.name) ?? 0
      callsOf.set(tool.name, callsSoFar + 1)
      let result: ServerToolResult
      // What is left of the request's cap on upstream calls, for the tool's own model calls.
      const innerBudget: UpstreamCallBudget = { used: 0, max: Math.max(0, maxUpstreamCalls - attempts.length - innerCallsMade) }
      // The item opens before the tool runs; its progress events go out as they happen.
      const opening: Record<string, unknown> = { type: tool.type, ...tool.opening?.(args, parameters) }
      const started = encoder.serverToolStarted?.({ item: opening, eventPrefix: progressEventsFor(tool, prepared.userAgent) })
      if (started !== undefined) write(started.sse)
      const progress =
        streaming && started?.eventPrefix !== undefined && encoder.serverToolProgress !== undefined
          ? (p: ServerToolProgressEvent) => write(encoder.serverToolProgress?.(started, p) ?? "")
          : undefined
      const ended = (item: Readonly<Record<string, unknown>>) => {
        if (started !== undefined && encoder.serverToolDone !== undefined) write(encoder.serverToolDone(started, item))
      }
      try {
        const context: ServerToolContext | ModelCallingContext =
          innerCalls === undefined
            ? { settings, signal: toolAbort.signal, workspaceId: prepared.principal.workspaceId, callsSoFar, progress }
            : {
                settings,
                signal: toolAbort.signal,
                workspaceId: prepared.principal.workspaceId,
                callsSoFar,
                progress,
                innerCalls,
                // The tool's own model calls share the request's cap on upstream calls.
                parent: {
                  generationId: life.generationId,
                  principal: prepared.principal,
                  sessionId: prepared.sessionId,
                  storeContent: prepared.storeContent,
                  signal: toolAbort.signal,
                  budget: innerBudget,
                },
                model: request.model,
                disabledServerTools: toolPlan.disabled,
              }
        result = await tool.run(args, parameters, context)
        innerCallsMade += innerBudget.used
      } catch (e) {
        innerCallsMade += innerBudget.used
        ended({ ...opening, status: "incomplete" })
        return JSON.stringify({ status: "failed", error: e instanceof Error ? e.message : "the tool failed" })
      }
      use.tool_calls_executed++
      use.web_search_requests += result.searchRequests ?? 0
      if (result.searchResults !== undefined) numSearchResults = (numSearchResults ?? 0) + result.searchResults
      if (result.fetches !== undefined) numFetches = (numFetches ?? 0) + result.fetches
      if (result.searchEngine !== undefined) webSearchEngine = result.searchEngine
      toolCost += result.cost
      unheldToolCost += result.cost
      if (result.citable !== undefined) encoder.cite?.(result.citable)
      ended(result.item)
      return result.modelOutput
    }

    /** Whether a `stop_server_tools_when` condition holds after a turn. */
    const stopped = (steps: number, turnCalls: ReadonlyArray<ServerCall>, reason: FinishReason | undefined): boolean => {
      for (const c of toolPlan.stopWhen) {
        switch (c.type) {
          case "step_count_is":
            if (steps >= c.step_count) return true
            break
          case "has_tool_call":
            if (turnCalls.some((call) => call.declared.tool.name === c.tool_name || call.declared.tool.type === serverToolTypeOf(c.tool_name)))
              return true
            break
          case "max_tokens_used":
            if (usage.inputTokens + usage.outputTokens >= c.max_tokens) return true
            break
          case "max_cost":
            if (modelCost + toolCost >= c.max_cost_in_dollars) return true
            break
          case "finish_reason_is":
            if (reason === c.reason) return true
            break
        }
      }
      return false
    }

    /** How an ended request failed or was cut, for its record and its last event. */
    const failure = (cause: unknown): { status: Outcome["status"]; error?: Outcome["error"]; event?: { code: string; message: string }; api?: ApiError } => {
      if (shuttingDown) return { status: "cancelled", error: { message: shutdownMessage, status: 503 }, event: { code: "server_shutting_down", message: shutdownMessage } }
      if (upstreamAbort.signal.reason instanceof DeadlineExceeded) {
        return { status: "failed", error: { message: deadlineMessage, status: 408 }, event: { code: "timeout", message: deadlineMessage }, api: new RequestTimeout({ message: deadlineMessage }) }
      }
      if (upstreamAbort.signal.aborted) return { status: "cancelled" }
      const error = asProviderError(cause)
      router.recordFailure(endpoint, error.kind)
      const message = `Provider ${endpoint.provider.id} failed mid-answer: ${error.message}`
      return {
        status: "failed",
        error: { message, status: statusOfFailure(error) },
        event: { code: failureCodeOf(error), message },
        api: apiErrorOf(error, endpoint.provider.id),
      }
    }

    /**
     * The loop from the first turn on. Returns how it ended: the finish (its extras and status),
     * or a failure. Writes as it goes when streaming.
     */
    type Ending =
      | { readonly kind: "answer"; readonly incompleteReason?: string }
      | { readonly kind: "failure"; readonly cause: unknown }
      | { readonly kind: "refused"; readonly turn: Extract<TurnResult, { refused: ApiError }> }
    const drive = async (): Promise<Ending> => {
      let turn: Extract<TurnResult, { call: unknown }> = first
      let current = { endpoint: first.endpoint, request: firstRequest, promptBound: prepared.promptBound, estimatedInput: prepared.estimatedInputTokens }
      let final = false
      let steps = 0
      for (;;) {
        const calls = new Map<number, ServerCall>()
        const seen: { clientCalled: boolean; usage: Usage | undefined; reason: FinishReason | undefined } = { clientCalled: false, usage: undefined, reason: undefined }
        const textBefore = encoder.completionText.length + encoder.reasoningText.length
        const read = await readTurn(turn, calls, seen)
        const produced = encoder.completionText.length + encoder.reasoningText.length - textBefore
        const turnText = produced > 0 ? encoder.completionText.slice(-produced) : ""
        charge(current, seen.usage, produced)
        if (!read.ok) return { kind: "failure", cause: read.cause }
        router.recordSuccess(plan, endpoint, { ttftMs: undefined, outputTokens: seen.usage?.outputTokens ?? 0, generationMs: undefined })
        const turnCalls = [...calls.values()]
        use.tool_calls_requested += turnCalls.length
        // The answer: text, a client's own call, or the last (tool-less) turn.
        if (turnCalls.length === 0 || seen.clientCalled || final) {
          write(encoder.push([{ type: "usage", usage }, { type: "finish", reason: seen.reason ?? "stop" }]))
          return { kind: "answer" }
        }
        steps++
        if (turnText !== "") conversation.push({ type: "message", role: "assistant", content: turnText })
        for (const call of turnCalls) {
          conversation.push({ type: "function_call", call_id: call.callId, name: call.declared.tool.name, arguments: call.args === "" ? "{}" : call.args })
          const output =
            use.tool_calls_executed < toolPlan.maxToolCalls
              ? await runCall(call)
              : JSON.stringify({ status: "failed", error: "not run: this request's server-tool budget (max_tool_calls) is used up" })
          conversation.push({ type: "function_call_output", call_id: call.callId, output })
          if (upstreamAbort.signal.aborted) return { kind: "failure", cause: upstreamAbort.signal.reason }
        }
        // The budget: the next turn is the last one once it is spent or a stop condition holds.
        final = use.tool_calls_executed >= toolPlan.maxToolCalls || stopped(steps, turnCalls, seen.reason) || attempts.length + innerCallsMade + 1 >= maxUpstreamCalls
        if (attempts.length + innerCallsMade >= maxUpstreamCalls) {
          write(encoder.push([{ type: "usage", usage }, { type: "finish", reason: "length" }]))
          return { kind: "answer", incompleteReason: "max_upstream_calls" }
        }
        // Each later turn holds its worst case (and the tools' cost so far) before it runs.
        let next = turnRequest(final)
        let money = moneyOf(JSON.stringify(next), next, prepared.presetInstructions ?? "", plan, parts)
        let held = await holdMore(life, money.worstCase + unheldToolCost)
        if (held === "refused" && !final) {
          final = true
          next = turnRequest(true)
          money = moneyOf(JSON.stringify(next), next, prepared.presetInstructions ?? "", plan, parts)
          held = await holdMore(life, money.worstCase + unheldToolCost)
        }
        if (held === "refused") {
          // The tools that ran are charged: their cost is held on its own if it still fits.
          const tools = unheldToolCost > 0 ? await holdMore(life, unheldToolCost) : "none"
          if (tools !== "none" && tools !== "refused") extraHolds.push(tools)
          write(encoder.push([{ type: "usage", usage }, { type: "finish", reason: "length" }]))
          return { kind: "answer", incompleteReason: "max_cost" }
        }
        if (held !== "none") extraHolds.push(held)
        unheldToolCost = 0
        if (upstreamAbort.signal.aborted) return { kind: "failure", cause: upstreamAbort.signal.reason }
        const opened = await runTurn(next, plan, { streaming, upstreamAbort, trace, startedAt: life.startedAt, attempts })
        if (opened.refused !== undefined) return { kind: "refused", turn: opened }
        turn = opened
        endpoint = opened.endpoint
        current = { endpoint: opened.endpoint, request: next, promptBound: money.promptBound, estimatedInput: money.estimatedInputTokens }
      }
    }

    if (!streaming) {
      const ending = await drive()
      if (ending.kind === "answer") {
        encoder.finish(finishExtras(ending.incompleteReason))
        const status = encoder.status === "failed" ? "failed" : encoder.status === "incomplete" ? "incomplete" : "completed"
        const committed = end(status)
        const headers = { "content-type": "application/json", ...idHeader }
        const response = new Response(JSON.stringify(encoder.result()), { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
        return after(committed, response, format, idHeader)
      }
      if (ending.kind === "refused") {
        end("failed", ending.turn.outcome.error)
        return errorResponseIn(format, ending.turn.refused, idHeader)
      }
      const failed = failure(ending.cause)
      end(failed.status, failed.error)
      return errorResponseIn(format, failed.api ?? apiErrorOf(asProviderError(ending.cause), endpoint.provider.id), idHeader)
    }

    // Streaming: the first byte goes out now; from here a failure is the format's failure event.
    const utf8 = new TextEncoder()
    let cut: () => void = () => undefined
    // Comments keep the stream open through proxies while a tool runs or a later turn has not begun.
    let lastWrite = Date.now()
    let keepAlive: ReturnType<typeof setInterval> | undefined
    const body = new ReadableStream<Uint8Array>({
      start(controller) {
        write = (text) => {
          if (text.length === 0) return
          lastWrite = Date.now()
          try {
            controller.enqueue(typeof text === "string" ? utf8.encode(text) : text.slice())
          } catch {
            // The client went away: the loop sees the abort.
          }
        }
        cut = () => {
          shuttingDown = true
          upstreamAbort.abort(new Error("server shutting down"))
        }
        lifecycle.openStream(cut)
        write(encoder.start())
        keepAlive = startKeepAlive(keepAliveMs, () => {
          if (keepAliveDue(lastWrite, keepAliveMs)) write(KEEP_ALIVE)
        })
        const close = (committed: Promise<boolean> | undefined, last: string, status: string) => {
          clearInterval(keepAlive)
          void (committed ?? Promise.resolve(true)).then((kept) => {
            // Durable answers: a record that could not be kept ends the stream in the format's failure event.
            write(kept ? last : storeFailureEvent(format, notRecorded()))
            try {
              controller.close()
            } catch {
              // Closed already (the client went away).
            }
            lifecycle.closeStream(cut)
            trace?.endStream(status)
          })
        }
        void drive().then(
          (ending) => {
            if (ending.kind === "answer") {
              const last = encoder.finish(finishExtras(ending.incompleteReason))
              const status = encoder.status === "failed" ? "failed" : encoder.status === "incomplete" ? "incomplete" : "completed"
              return close(end(status), last, status)
            }
            if (ending.kind === "refused") {
              const error = ending.turn.outcome.error
              const last = encoder.fail({ code: "server_error", message: ending.turn.refused.message }, finishExtras())
              return close(end("failed", error), last, "failed")
            }
            const failed = failure(ending.cause)
            const last = failed.event === undefined ? "" : encoder.fail(failed.event, finishExtras())
            return close(end(failed.status, failed.error), last, failed.status)
          },
          (e: unknown) => {
            const last = encoder.fail({ code: "server_error", message: "Internal server error" }, finishExtras())
            close(end("failed", { message: e instanceof Error ? e.message : "the loop failed", status: 500 }), last, "failed")
          },
        )
      },
      cancel() {
        // The client went away: stop the turn or tool in flight; the loop settles what was spent.
        clearInterval(keepAlive)
        upstreamAbort.abort(new Error("client disconnected"))
      },
    })
    if (trace !== undefined) trace.streaming = true
    const headers = { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no", ...idHeader }
    return new Response(body, { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
  }

  return { respond } as const
}

export type ToolLoop = ReturnType<typeof makeToolLoop>
