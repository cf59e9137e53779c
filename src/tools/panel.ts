/**
 * Fusion's panel with tools (docs/fusion.md): each analysis model answers the prompt with the panel's
 * server tools offered as function tools; when it calls one, the tool runs (`ServerTool.run`) and
 * the panelist is called again with the call and its output appended, until it answers in text or
 * has made `max_tool_calls` calls (then one last call with `tool_choice: "none"`, so it ends in
 * text). Tools omitted: the web tools the gateway can run (web_search needs `search` config,
 * web_fetch always), the SDK's default; `[]`: none. datetime only when listed; fusion never (no
 * fusion inside fusion).
 *
 * The judge answers with the same tools, on the same rules (the contract: "panelists and judge
 * iterate tool calls until they answer or reach max_tool_calls"), its answer format on every call.
 *
 * Every model call is an inner call (held, charged and recorded under the request's generation)
 * and counts against the request's `server.max_upstream_calls`: a panelist's tool turns stop while
 * the judge and the request's model still have their calls left, the judge's while the request's
 * model has its call. A tool that fails is a failed
 * result the panelist sees. The tools' own prices (`search.pricing.request`) are not on the inner
 * records: they are summed in `PanelToolUse` and charged with the request (the loop's tool cost, or
 * the plugin's stage cost), like the request's own tool calls.
 */
import { Either } from "effect"
import type { Settings } from "../config/Config.js"
import { decodeResponsesRequest, type ResponsesRequest } from "../domain/responses.js"
import { datetimeTool } from "./datetime.js"
import type { Citable, DeclaredTool, ServerTool, ServerToolContext, ServerToolResult } from "./types.js"
import type { InnerCallResult, UpstreamCallBudget } from "./inner-calls.js"
import { namesTool, toolTypeLookup } from "./names.js"
import { webFetchTool } from "./web-fetch.js"
import { webSearchTool } from "./web-search.js"

// The tools themselves, not the registry (index.ts imports fusion.ts, which imports this file).
const PANEL_TOOLS: ReadonlyArray<ServerTool> = [webSearchTool, webFetchTool, datetimeTool]
/** `tools` omitted: the web tools (the SDK's default), those this gateway can run. */
const DEFAULT_PANEL_TOOLS: ReadonlyArray<ServerTool> = [webSearchTool, webFetchTool]
const PANEL_TOOL_NAMES = PANEL_TOOLS.map((t) => t.type).join(", ")
const panelToolTypeOf = toolTypeLookup(PANEL_TOOLS)

/** `max_tool_calls` when the caller gives none: each panelist's tool calls at most. */
export const DEFAULT_PANEL_MAX_TOOL_CALLS = 8

/** Model calls kept for after a panelist (the judge, then the request's model): its tool turns leave them. */
export const CALLS_AFTER_PANELIST = 2
/** Model calls kept for after the judge (the request's model). */
export const CALLS_AFTER_JUDGE = 1

/** What each panelist may use. */
export interface PanelTools {
  readonly tools: ReadonlyArray<DeclaredTool>
  /** Tool calls per panelist at most (1 to 16). */
  readonly maxToolCalls: number
}

/** A panel tool as the caller lists it (the SDK's `{type, parameters?}`). */
export interface PanelToolAsk {
  readonly type: string
  readonly parameters?: Readonly<Record<string, unknown>> | undefined
}

/**
 * The panel's tools: `given` omitted, the web tools this gateway runs (minus the workspace's
 * `disabled`); `[]`, none; else each one checked (a panel tool, available, not disabled, listed
 * once, its `parameters` valid). A string: what is wrong, naming `tools[i]` and the rule (a 400).
 */
export const panelToolsOf = (
  given: ReadonlyArray<PanelToolAsk> | undefined,
  maxToolCalls: number | undefined,
  settings: Settings,
  disabled: ReadonlyArray<string>,
): PanelTools | string => {
  const max = maxToolCalls ?? DEFAULT_PANEL_MAX_TOOL_CALLS
  const off = (tool: ServerTool) => disabled.some((name) => namesTool(name, tool))
  if (given === undefined) {
    const tools = DEFAULT_PANEL_TOOLS.filter((tool) => tool.unavailable(settings) === undefined && !off(tool))
    return { tools: tools.map((tool) => ({ tool, parameters: {} })), maxToolCalls: max }
  }
  const tools: Array<DeclaredTool> = []
  for (let i = 0; i < given.length; i++) {
    const { type, parameters = {} } = given[i] as PanelToolAsk
    const at = `tools[${i}]`
    const named = panelToolTypeOf(type)
    if (named === "openrouter:fusion") return `${at}.type: fusion cannot be a tool of fusion's own panel`
    const tool = PANEL_TOOLS.find((t) => t.type === named)
    if (tool === undefined) return `${at}.type: ${JSON.stringify(type)} is not a tool the panel can use (${PANEL_TOOL_NAMES})`
    const why = tool.unavailable(settings)
    if (why !== undefined) return `${at}.type: ${JSON.stringify(type)} cannot run: ${why}`
    if (off(tool)) return `${at}.type: ${JSON.stringify(type)} is disabled in this workspace (disabled_server_tools)`
    if (tools.some((d) => d.tool === tool)) return `${at}.type: ${JSON.stringify(type)} is listed twice`
    const problem = tool.parametersProblem?.(parameters, settings, disabled)
    if (problem !== undefined) return `${at}.parameters: ${problem}`
    tools.push({ tool, parameters })
  }
  return { tools, maxToolCalls: max }
}

/** The panel's tools and what they run with. */
export interface PanelSetup extends PanelTools {
  /** What a tool may use while it runs (`callsSoFar` is the panelist's own). */
  readonly context: Omit<ServerToolContext, "callsSoFar">
  /** The request's model calls (the same object the inner calls count in). */
  readonly budget: UpstreamCallBudget
}

/** The panel's tool use, over all its panelists: charged with the request, counted in its usage and record. */
export interface PanelToolUse {
  /** USD of the tools' own prices (not on the inner records). */
  cost: number
  toolCallsRequested: number
  toolCallsExecuted: number
  webSearchRequests: number
  /** Null while no tool reported one (as the generation record has them). */
  searchResults: number | null
  fetches: number | null
  searchEngine: string | undefined
  /** The pages the tools found or read, once each (the SDK item's `sources`). */
  readonly sources: Array<Citable>
}

export const noToolUse = (): PanelToolUse => ({
  cost: 0,
  toolCallsRequested: 0,
  toolCallsExecuted: 0,
  webSearchRequests: 0,
  searchResults: null,
  fetches: null,
  searchEngine: undefined,
  sources: [],
})

/** One answer (a panelist's, the judge's), over all its calls: as an inner call's, with every call's record. */
export type PanelAnswer = (
  | Pick<Extract<InnerCallResult, { ok: true }>, "ok" | "model" | "text" | "cost">
  | Pick<Extract<InnerCallResult, { ok: false }>, "ok" | "model" | "error" | "status" | "cost">
) & { readonly generations: ReadonlyArray<string> }

/** Runs one model call for the run (an inner call of the request). */
export type RunModel = (request: ResponsesRequest, model: string) => Promise<InnerCallResult>

/** A request the run built (from checked parts: a failure is a bug, not the caller's). */
export const requestOf = (body: Record<string, unknown>): ResponsesRequest => {
  const decoded = decodeResponsesRequest(body)
  if (Either.isLeft(decoded)) throw new Error(`fusion built an invalid request: ${decoded.left.message}`)
  return decoded.right
}

/** The answer of one call, as a panelist's. */
const answerOf = (result: InnerCallResult, cost: number, generations: ReadonlyArray<string>): PanelAnswer =>
  result.ok
    ? { ok: true, model: result.model, text: result.text, cost, generations }
    : { ok: false, model: result.model, error: result.error, status: result.status, cost, generations }

const failedOutput = (error: string) => JSON.stringify({ status: "failed", error })

/** What one answer is asked: the user's text, and (the judge's) instructions and answer format, kept on every call. */
export interface Ask {
  readonly input: string
  readonly instructions?: string
  readonly temperature?: number
  readonly text?: Readonly<Record<string, unknown>>
}

/**
 * One answer to `ask` (a panelist's, or the judge's): one call without tools, or the tool loop
 * above, leaving `callsAfter` of the request's model calls for what comes after it. Never rejects
 * for a tool's failure (the model sees it); `use` sums the tools' use over the run.
 */
export const answerWithTools = async (
  ask: Ask,
  model: string,
  runModel: RunModel,
  setup: PanelSetup | undefined,
  use: PanelToolUse,
  callsAfter: number,
): Promise<PanelAnswer> => {
  const generations: Array<string> = []
  let cost = 0
  const once = async (request: ResponsesRequest) => {
    const result = await runModel(request, model)
    cost += result.cost
    if (result.generationId !== undefined) generations.push(result.generationId)
    return result
  }
  if (setup === undefined || setup.tools.length === 0) return answerOf(await once(requestOf({ ...ask })), cost, generations)

  const byName = new Map(setup.tools.map((d) => [d.tool.name, d]))
  const offered = setup.tools.map(({ tool }) => ({ type: "function", name: tool.name, description: tool.description, parameters: tool.parameters }))
  const conversation: Array<Record<string, unknown>> = [{ type: "message", role: "user", content: ask.input }]
  const callsOf = new Map<string, number>()
  let made = 0
  // A call with tools needs room for the answer's last call after it and what comes after the answer.
  const roomForTools = () => setup.budget.max - setup.budget.used >= callsAfter + 2
  let final = !roomForTools()

  const run = async (declared: DeclaredTool, args: string): Promise<string> => {
    let parsed: unknown
    try {
      parsed = args.trim() === "" ? {} : JSON.parse(args)
    } catch {
      return failedOutput("the call's arguments are not valid JSON")
    }
    const callsSoFar = callsOf.get(declared.tool.name) ?? 0
    callsOf.set(declared.tool.name, callsSoFar + 1)
    let result: ServerToolResult
    try {
      result = await declared.tool.run(parsed, declared.parameters, { ...setup.context, callsSoFar })
    } catch (e) {
      return failedOutput(e instanceof Error ? e.message : "the tool failed")
    }
    use.toolCallsExecuted++
    use.cost += result.cost
    use.webSearchRequests += result.searchRequests ?? 0
    if (result.searchResults !== undefined) use.searchResults = (use.searchResults ?? 0) + result.searchResults
    if (result.fetches !== undefined) use.fetches = (use.fetches ?? 0) + result.fetches
    if (result.searchEngine !== undefined) use.searchEngine = result.searchEngine
    for (const page of result.citable ?? []) if (!use.sources.some((s) => s.url === page.url)) use.sources.push(page)
    return result.modelOutput
  }

  for (;;) {
    const result = await once(requestOf({ ...ask, input: conversation, tools: offered, ...(final ? { tool_choice: "none" } : {}) }))
    const calls = result.ok ? (result.toolCalls ?? []) : []
    if (!result.ok || calls.length === 0 || final) return answerOf(result, cost, generations)
    use.toolCallsRequested += calls.length
    if (result.text !== "") conversation.push({ type: "message", role: "assistant", content: result.text })
    for (const call of calls) {
      conversation.push({ type: "function_call", call_id: call.callId, name: call.name, arguments: call.arguments === "" ? "{}" : call.arguments })
      const declared = byName.get(call.name)
      made++
      const output =
        declared === undefined
          ? failedOutput(`there is no tool named ${JSON.stringify(call.name)}`)
          : made > setup.maxToolCalls
            ? failedOutput(`not run: this panelist's tool calls (max_tool_calls ${setup.maxToolCalls}) are used up`)
            : await run(declared, call.arguments)
      conversation.push({ type: "function_call_output", call_id: call.callId, output })
    }
    // The next call is the last (tool-less) one once the tool calls are used up, or when the
    // request's model calls would not leave this answer a last call and what comes after it theirs.
    final = made >= setup.maxToolCalls || !roomForTools()
  }
}
