/**
 * One request's run of the server-tool loop (loop.ts starts it and answers with what it leaves):
 * the conversation so far, what the turns and tools used, and the steps: read a turn into the
 * encoder, charge it, run the server-tool calls it made, decide whether the next turn is the last,
 * hold its worst case, run it. Every turn goes through the turn runner (turns.ts), as the plain
 * request's one turn does.
 */
import { Effect, Either, Option, type Types } from "effect"
import type { Settings } from "../config/Config.js"
import { type ApiError, RequestTimeout } from "../domain/errors.js"
import { costOf, isValidUsage, type PartAllowance, type Usage } from "../domain/pricing.js"
import { ANTHROPIC_REASONING, type InputItem, type ResponsesRequest, sealToken } from "../domain/responses.js"
import type { ClientFormat, Encoder, FinishExtras, ServerToolUse } from "../formats/format.js"
import type { PlainAbort } from "../providers/abort.js"
import type { FinishReason, ProviderEvent } from "../providers/types.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import type { Endpoint } from "../services/Catalog.js"
import type { Reservation, Spend } from "../services/Spend.js"
import { serverToolTypeOf, type ServerToolPlan } from "../tools/declare.js"
import type { InnerCalls, UpstreamCallBudget } from "../tools/inner-calls.js"
import type { DeclaredTool, ModelCallingContext, ServerTool, ServerToolContext, ServerToolProgressEvent, ServerToolResult } from "../tools/types.js"
import { type Attempt, type Finish, heldUsd, type Outcome, type RequestLife } from "./finish.js"
import type { RequestLifecycle } from "./lifecycle.js"
import type { RequestTrace } from "./trace.js"
import { moneyOf } from "./money.js"
import { boundedUsage, NO_USAGE } from "./record.js"
import { DeadlineExceeded, statusOfFailure, type TurnOptions, type TurnResult } from "./turns.js"
import { apiErrorOf, asProviderError, failureCodeOf } from "./upstream-errors.js"

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
export type OpenTurn = Extract<TurnResult, { call: unknown }>

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

/** What a turn's reading kept back from the client: server-tool calls, the usage and the finish reason. */
interface TurnSeen {
  readonly calls: Map<number, ServerCall>
  /** The turn's reasoning since its last seal, and its sealed blocks: the next turn sends them back (Anthropic requires it with tool use). */
  reasoning: string
  readonly sealed: Array<InputItem>
  clientCalled: boolean
  usage: Usage | undefined
  reason: FinishReason | undefined
}

/** How a turn's reading ended. */
type Read = { readonly ok: true } | { readonly ok: false; readonly cause: unknown }

/** How the loop ended: the answer (its finish written), a failure, or a later turn refused before its first byte. */
export type Ending =
  | { readonly kind: "answer"; readonly incompleteReason?: string }
  | { readonly kind: "failure"; readonly cause: unknown }
  | { readonly kind: "refused"; readonly turn: Extract<TurnResult, { refused: ApiError }> }

/** How an ended request failed or was cut, for its record and its last event. */
export interface Failure {
  readonly status: Outcome["status"]
  readonly error?: Outcome["error"]
  readonly event?: { readonly code: string; readonly message: string }
  readonly api?: ApiError
}

/** The turn being read: its endpoint and request, and the bounds its hold was made for. */
interface CurrentTurn {
  readonly endpoint: Endpoint
  readonly request: ResponsesRequest
  readonly promptBound: number
  readonly estimatedInput: number
}

export class LoopRun {
  readonly prepared: LoopRequest["life"]["prepared"]
  readonly toolPlan: ServerToolPlan
  readonly request: ResponsesRequest
  private readonly byName: Map<string, DeclaredTool>
  private readonly tools: Tools
  private readonly conversation: Array<InputItems[number]>
  /** Tools are told to stop when the request ends (client gone, deadline, shutdown). */
  private readonly toolAbort = new AbortController()
  private readonly onAbort = () => this.toolAbort.abort(this.r.upstreamAbort.reason)
  /** The model calls the tools (fusion's panel and judge) and the stages (the fusion plugin) made: they count with the turns' attempts. */
  private innerCallsMade: number
  private readonly maxUpstreamCalls: number

  // What the loop has used so far.
  endpoint!: Endpoint
  encoder!: Encoder
  usage: Usage = NO_USAGE
  private modelCost = 0
  private toolCost = 0
  private readonly extraHolds: Array<Reservation> = []
  private readonly use: Types.Mutable<ServerToolUse> = { tool_calls_requested: 0, tool_calls_executed: 0, web_search_requests: 0 }
  private readonly callsOf = new Map<string, number>()
  // For the record: null until a tool reports one.
  private numSearchResults: number | null = null
  private numFetches: number | null = null
  private webSearchEngine: string | null = null
  firstTokenAt: number | undefined
  shuttingDown = false
  /** Where the answer's text goes (a stream's enqueue; nothing for a JSON answer, read at its end). */
  write: (text: string | Uint8Array) => void = () => undefined

  constructor(
    readonly r: LoopRequest,
    private readonly deps: LoopDeps,
    maxUpstreamCalls: number,
  ) {
    this.prepared = r.life.prepared
    this.toolPlan = this.prepared.serverTools as ServerToolPlan
    this.request = this.prepared.request
    this.byName = new Map<string, DeclaredTool>(this.toolPlan.tools.map((d) => [d.tool.name, d]))
    this.tools = offeredTools(this.request, this.toolPlan)
    this.conversation = [...inputItemsOf(this.request)]
    this.innerCallsMade = this.prepared.upstreamCalls
    this.maxUpstreamCalls = maxUpstreamCalls
    r.upstreamAbort.addEventListener("abort", this.onAbort)
  }

  /** A turn's request: the conversation so far with the tools; the last one may not call a tool. */
  turnRequest(final: boolean): ResponsesRequest {
    const turn: Types.Mutable<ResponsesRequest> = { ...this.request, input: this.conversation.slice(), tools: this.tools }
    // Tools stay declared (the conversation names them) but the model may not call one.
    if (final) turn.tool_choice = "none"
    return turn
  }

  /** A failover candidate's request as context-compression fitted it, with the server tools offered as functions. */
  withTools(fitted: ResponsesRequest | undefined): ResponsesRequest | undefined {
    return fitted === undefined ? undefined : { ...fitted, tools: this.tools }
  }

  /** The first turn answered: its endpoint, and the encoder of the whole loop's answer. */
  begin(first: OpenTurn, encoder: Encoder): void {
    this.endpoint = first.endpoint
    this.encoder = encoder
  }

  /** Stops listening to the request's abort (the loop ended). */
  detach(): void {
    this.r.upstreamAbort.removeEventListener("abort", this.onAbort)
  }

  /** The answer's end: settle and record once, with the loop's sums. */
  end(status: Outcome["status"], error?: Outcome["error"]): Promise<boolean> | undefined {
    this.r.cleanup()
    this.detach()
    const outcome: Types.Mutable<Outcome> = {
      endpoint: this.endpoint,
      assembler: this.encoder,
      status,
      firstTokenAt: this.firstTokenAt,
      charged: { usage: this.usage, cost: this.modelCost + this.toolCost },
    }
    if (error !== undefined) outcome.error = error
    if (this.extraHolds.length > 0) outcome.extraHolds = this.extraHolds
    if (this.numSearchResults !== null || this.numFetches !== null || this.webSearchEngine !== null) {
      outcome.serverTools = { numSearchResults: this.numSearchResults, numFetches: this.numFetches, webSearchEngine: this.webSearchEngine }
    }
    return this.deps.finish(this.r.life, this.r.streaming, outcome)
  }

  finishExtras(incompleteReason?: string): FinishExtras {
    const extras: Types.Mutable<FinishExtras> = {
      usage: this.usage,
      cost: this.modelCost + this.toolCost + this.prepared.spentUsd,
      isByok: this.endpoint.isByok,
      serverToolUse: this.use,
    }
    if (incompleteReason !== undefined) extras.incompleteReason = incompleteReason
    if (this.prepared.withMetadata) {
      extras.serviceMetadata = this.r.serviceMetadata(this.endpoint)
      if (this.prepared.metadataAlias) extras.metadataAlias = true
    }
    return extras
  }

  /** The status the answer's record takes from the encoder once it finished. */
  finishedStatus(): Outcome["status"] {
    return this.encoder.status === "failed" ? "failed" : this.encoder.status === "incomplete" ? "incomplete" : "completed"
  }

  /** Reads one turn into the encoder; server-tool calls, usage and the finish reason are kept back in `seen`. */
  private async readTurn(turn: OpenTurn, seen: TurnSeen): Promise<Read> {
    const relay = (events: ReadonlyArray<ProviderEvent>) => {
      if (this.firstTokenAt === undefined) {
        this.firstTokenAt = Date.now()
        this.r.trace?.markFirstToken()
      }
      const kept: Array<ProviderEvent> = []
      for (const e of events) {
        switch (e.type) {
          case "tool_call_start": {
            const declared = this.byName.get(e.name)
            if (declared === undefined) {
              seen.clientCalled = true
              kept.push(e)
            } else if (!seen.calls.has(e.index)) seen.calls.set(e.index, { callId: e.callId, declared, args: "" })
            break
          }
          case "tool_call_delta": {
            const call = seen.calls.get(e.index)
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
          case "reasoning":
            seen.reasoning += e.delta
            kept.push(e)
            break
          case "reasoning_signature":
            seen.sealed.push({
              type: "reasoning",
              summary: seen.reasoning === "" || e.redacted === true ? [] : [{ type: "summary_text", text: seen.reasoning }],
              encrypted_content: sealToken(e.signature, e.redacted),
              format: ANTHROPIC_REASONING,
            })
            seen.reasoning = ""
            kept.push(e)
            break
          default:
            kept.push(e)
        }
      }
      if (kept.length > 0) this.write(this.encoder.push(kept))
    }
    try {
      if (turn.call.whole !== undefined) relay(turn.call.whole)
      else for await (const batch of turn.call.events) relay(batch)
      return { ok: true }
    } catch (cause) {
      return { ok: false, cause }
    }
  }

  /** A turn's usage within what was held for it, at its endpoint's price, added to the sums (as finish charges a request's one turn). */
  private charge(turn: CurrentTurn, reported: Usage | undefined, producedChars: number): void {
    const charged = boundedUsage({ request: turn.request, estimatedInputTokens: turn.estimatedInput, promptBound: turn.promptBound }, turn.endpoint, reported, producedChars)
    this.usage = addUsage(this.usage, charged)
    this.modelCost += Math.max(0, costOf(turn.endpoint.pricing, charged))
  }

  /**
   * What must be held beyond the holds so far for the spend so far and `worstCase` more. A turn's
   * hold is its worst case; what it did not spend is left for the next ones (each turn holding
   * its own on top, a key with money left was refused the tool-less last turn: max_cost, no answer).
   */
  private shortOf(worstCase: number): number {
    let held = Option.isSome(this.prepared.reservation) ? heldUsd(this.prepared.reservation.value) : 0
    for (const hold of this.extraHolds) held += heldUsd(hold)
    const short = this.modelCost + this.toolCost + worstCase - held
    // Below a nano-dollar (the ledger's unit) it is the sums' rounding, not a shortfall.
    return short < 1e-9 ? 0 : short
  }

  /** Holds `usd` more against the key for a later turn: the hold, none needed, or refused. */
  private async holdMore(usd: number): Promise<Reservation | "none" | "refused"> {
    const { principal, allByok } = this.prepared
    if (usd <= 0 || !this.deps.spend.holds(principal.key, { isByok: allByok })) return "none"
    const held = await this.deps.runPromise(Effect.either(this.deps.spend.reserve(principal.key, usd, { isByok: allByok })))
    if (Either.isLeft(held)) return "refused"
    return Option.isSome(held.right) ? held.right.value : "none"
  }

  /** Runs one server-tool call; the model's output for it. Never throws. */
  private async runCall(call: ServerCall): Promise<string> {
    const { tool, parameters } = call.declared
    const { settings, innerCalls } = this.deps
    const prepared = this.prepared
    let args: unknown
    try {
      args = call.args.trim() === "" ? {} : JSON.parse(call.args)
    } catch {
      return JSON.stringify({ status: "failed", error: "the call's arguments are not valid JSON" })
    }
    const callsSoFar = this.callsOf.get(tool.name) ?? 0
    this.callsOf.set(tool.name, callsSoFar + 1)
    let result: ServerToolResult
    // What is left of the request's cap on upstream calls, for the tool's own model calls, less the one
    // the request's model keeps for its tool-less last turn (a model calling fusion again and again
    // spent the whole cap, and the request ended with no answer: max_upstream_calls).
    const innerBudget: UpstreamCallBudget = { used: 0, max: Math.max(0, this.maxUpstreamCalls - this.r.attempts.length - this.innerCallsMade - 1) }
    // The item opens before the tool runs; its progress events go out as they happen.
    const encoder = this.encoder
    const opening: Record<string, unknown> = { type: tool.type, ...tool.opening?.(args, parameters) }
    const started = encoder.serverToolStarted?.({ item: opening, eventPrefix: progressEventsFor(tool, prepared.userAgent) })
    if (started !== undefined) this.write(started.sse)
    const progress =
      this.r.streaming && started?.eventPrefix !== undefined && encoder.serverToolProgress !== undefined
        ? (p: ServerToolProgressEvent) => this.write(encoder.serverToolProgress?.(started, p) ?? "")
        : undefined
    const ended = (item: Readonly<Record<string, unknown>>) => {
      if (started !== undefined && encoder.serverToolDone !== undefined) this.write(encoder.serverToolDone(started, item))
    }
    const signal = this.toolAbort.signal
    try {
      const context: ServerToolContext | ModelCallingContext =
        innerCalls === undefined
          ? { settings, signal, workspaceId: prepared.principal.workspaceId, callsSoFar, progress }
          : {
              settings,
              signal,
              workspaceId: prepared.principal.workspaceId,
              callsSoFar,
              progress,
              innerCalls,
              // The tool's own model calls share the request's cap on upstream calls.
              parent: {
                generationId: this.r.life.generationId,
                principal: prepared.principal,
                sessionId: prepared.sessionId,
                storeContent: prepared.storeContent,
                signal,
                budget: innerBudget,
              },
              model: this.request.model,
              disabledServerTools: this.toolPlan.disabled,
            }
      result = await tool.run(args, parameters, context)
      this.innerCallsMade += innerBudget.used
    } catch (e) {
      this.innerCallsMade += innerBudget.used
      ended({ ...opening, status: "incomplete" })
      return JSON.stringify({ status: "failed", error: e instanceof Error ? e.message : "the tool failed" })
    }
    this.use.tool_calls_executed++
    this.use.web_search_requests += result.searchRequests ?? 0
    if (result.searchResults !== undefined) this.numSearchResults = (this.numSearchResults ?? 0) + result.searchResults
    if (result.fetches !== undefined) this.numFetches = (this.numFetches ?? 0) + result.fetches
    if (result.searchEngine !== undefined) this.webSearchEngine = result.searchEngine
    this.toolCost += result.cost
    if (result.citable !== undefined) encoder.cite?.(result.citable)
    ended(result.item)
    return result.modelOutput
  }

  /** Whether a `stop_server_tools_when` condition holds after a turn. */
  private stopped(steps: number, turnCalls: ReadonlyArray<ServerCall>, reason: FinishReason | undefined): boolean {
    for (const c of this.toolPlan.stopWhen) {
      switch (c.type) {
        case "step_count_is":
          if (steps >= c.step_count) return true
          break
        case "has_tool_call":
          if (turnCalls.some((call) => call.declared.tool.name === c.tool_name || call.declared.tool.type === serverToolTypeOf(c.tool_name))) return true
          break
        case "max_tokens_used":
          if (this.usage.inputTokens + this.usage.outputTokens >= c.max_tokens) return true
          break
        case "max_cost":
          if (this.modelCost + this.toolCost >= c.max_cost_in_dollars) return true
          break
        case "finish_reason_is":
          if (reason === c.reason) return true
          break
      }
    }
    return false
  }

  /** How an ended request failed or was cut, for its record and its last event. */
  failure(cause: unknown): Failure {
    const { deadlineMessage, shutdownMessage } = this.deps
    const upstreamAbort = this.r.upstreamAbort
    if (this.shuttingDown) return { status: "cancelled", error: { message: shutdownMessage, status: 503 }, event: { code: "server_shutting_down", message: shutdownMessage } }
    if (upstreamAbort.signal.reason instanceof DeadlineExceeded) {
      return { status: "failed", error: { message: deadlineMessage, status: 408 }, event: { code: "timeout", message: deadlineMessage }, api: new RequestTimeout({ message: deadlineMessage }) }
    }
    if (upstreamAbort.signal.aborted) return { status: "cancelled" }
    const error = asProviderError(cause)
    this.deps.router.recordFailure(this.endpoint, error.kind)
    const message = `Provider ${this.endpoint.provider.id} failed mid-answer: ${error.message}`
    return {
      status: "failed",
      error: { message, status: statusOfFailure(error) },
      event: { code: failureCodeOf(error), message },
      api: apiErrorOf(error, this.endpoint.provider.id),
    }
  }

  /** The loop from the first turn on; how it ended. Writes as it goes when streaming. */
  async drive(first: OpenTurn, firstRequest: ResponsesRequest): Promise<Ending> {
    const { router, runTurn, parts } = this.deps
    const { plan, streaming, upstreamAbort, trace, attempts, life } = this.r
    const prepared = this.prepared
    const encoder = this.encoder
    let turn: OpenTurn = first
    let current: CurrentTurn = { endpoint: first.endpoint, request: firstRequest, promptBound: prepared.promptBound, estimatedInput: prepared.estimatedInputTokens }
    let final = false
    let steps = 0
    for (;;) {
      const seen: TurnSeen = { calls: new Map(), reasoning: "", sealed: [], clientCalled: false, usage: undefined, reason: undefined }
      const textBefore = encoder.completionText.length + encoder.reasoningText.length
      const read = await this.readTurn(turn, seen)
      const produced = encoder.completionText.length + encoder.reasoningText.length - textBefore
      const turnText = produced > 0 ? encoder.completionText.slice(-produced) : ""
      this.charge(current, seen.usage, produced)
      if (!read.ok) return { kind: "failure", cause: read.cause }
      router.recordSuccess(plan, this.endpoint, { ttftMs: undefined, outputTokens: seen.usage?.outputTokens ?? 0, generationMs: undefined })
      const turnCalls = [...seen.calls.values()]
      this.use.tool_calls_requested += turnCalls.length
      // The answer: text, a client's own call, or the last (tool-less) turn.
      if (turnCalls.length === 0 || seen.clientCalled || final) {
        this.write(encoder.push([{ type: "usage", usage: this.usage }, { type: "finish", reason: seen.reason ?? "stop" }]))
        return { kind: "answer" }
      }
      steps++
      this.conversation.push(...seen.sealed)
      if (turnText !== "") this.conversation.push({ type: "message", role: "assistant", content: turnText })
      for (const call of turnCalls) {
        this.conversation.push({ type: "function_call", call_id: call.callId, name: call.declared.tool.name, arguments: call.args === "" ? "{}" : call.args })
        const output =
          this.use.tool_calls_executed < this.toolPlan.maxToolCalls
            ? await this.runCall(call)
            : JSON.stringify({ status: "failed", error: "not run: this request's server-tool budget (max_tool_calls) is used up" })
        this.conversation.push({ type: "function_call_output", call_id: call.callId, output })
        if (upstreamAbort.signal.aborted) return { kind: "failure", cause: upstreamAbort.signal.reason }
      }
      // The budget: the next turn is the last one once it is spent or a stop condition holds.
      const callsMade = attempts.length + this.innerCallsMade
      final = this.use.tool_calls_executed >= this.toolPlan.maxToolCalls || this.stopped(steps, turnCalls, seen.reason) || callsMade + 1 >= this.maxUpstreamCalls
      if (callsMade >= this.maxUpstreamCalls) {
        this.write(encoder.push([{ type: "usage", usage: this.usage }, { type: "finish", reason: "length" }]))
        return { kind: "answer", incompleteReason: "max_upstream_calls" }
      }
      // Each later turn's worst case is held before it runs, beyond what the holds so far leave.
      let next = this.turnRequest(final)
      let money = moneyOf(JSON.stringify(next), next, prepared.presetInstructions ?? "", plan, parts)
      let held = await this.holdMore(this.shortOf(money.worstCase))
      if (held === "refused" && !final) {
        final = true
        next = this.turnRequest(true)
        money = moneyOf(JSON.stringify(next), next, prepared.presetInstructions ?? "", plan, parts)
        held = await this.holdMore(this.shortOf(money.worstCase))
      }
      if (held === "refused") {
        // The tools that ran are charged: what the holds do not cover of them is held on its own if it still fits.
        const tools = await this.holdMore(this.shortOf(0))
        if (tools !== "none" && tools !== "refused") this.extraHolds.push(tools)
        this.write(encoder.push([{ type: "usage", usage: this.usage }, { type: "finish", reason: "length" }]))
        return { kind: "answer", incompleteReason: "max_cost" }
      }
      if (held !== "none") this.extraHolds.push(held)
      if (upstreamAbort.signal.aborted) return { kind: "failure", cause: upstreamAbort.signal.reason }
      const opened = await runTurn(next, plan, { streaming, upstreamAbort, trace, startedAt: life.startedAt, attempts })
      if (opened.refused !== undefined) return { kind: "refused", turn: opened }
      turn = opened
      this.endpoint = opened.endpoint
      current = { endpoint: opened.endpoint, request: next, promptBound: money.promptBound, estimatedInput: money.estimatedInputTokens }
    }
  }
}
