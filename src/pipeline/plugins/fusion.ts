/**
 * The `fusion` plugin (docs/fusion.md): before the model, the analysis panel answers the request's
 * last user message in parallel and the judge compares the answers (src/tools/fusion-core.ts);
 * then the panel's answers and the analysis go to the request's model as a system message above
 * that user message, and the model writes the final answer. The record's `router` is `fusion`.
 *
 * The panel and the judge are inner calls (src/tools/inner-calls.ts): each held, charged and
 * recorded on its own with the request's generation id as its parent (so that id is made here,
 * before the decision: `Loaded.generationId`). They run on the runtime as a `Missing` read, kept
 * in the plugin's slot of the request's `Loaded`, and the stages run again, as file-parser's parses do.
 * Every analysis model failing is a 502 naming them; a failed judge leaves the panel's answers
 * without an analysis (the pipeline entry says why).
 *
 * The panelists use the panel's tools (src/tools/panel.ts: the web tools when `tools` is omitted,
 * less the workspace's disabled_server_tools); the tools' prices are the stage's `cost`, charged
 * with the answer, and the pages they found are links the answer may cite.
 */
import { Effect, Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import { BadGateway, BadRequest } from "../../domain/errors.js"
import { newGenerationId } from "../../domain/generations.js"
import type { InputItem, ResponsesRequest } from "../../domain/responses.js"
import { AnyRecord, intBetween, oneOf } from "../../domain/schema-rules.js"
import { storesContent } from "../../services/ContentPolicy.js"
import { chooseFusion, fusionAskProblem, type FusionRun, runFusion, synthesisTextOf } from "../../tools/fusion-core.js"
import type { InnerCalls, UpstreamCallBudget } from "../../tools/inner-calls.js"
import { panelToolsOf } from "../../tools/panel.js"
import { Missing, type PipelineEntry, type StageState } from "../stages.js"
import { notAvailable, pluginFields, type PreModelHalf, type RequestPlugin, requestSlot } from "./plugin.js"

/**
 * A tool of fusion's panel, as the official SDK's `FusionPluginTool` has it: `{type, parameters?}`.
 * Which types the panel can use (web_search, web_fetch, datetime; by any prefix) and their
 * parameters are checked by the stage (src/tools/panel.ts), against the gateway's config.
 */
export const FusionTool = Schema.Struct({
  type: Schema.String,
  parameters: Schema.optional(AnyRecord),
})

export const FusionPlugin = Schema.Struct({
  ...pluginFields("fusion"),
  analysis_models: Schema.optional(
    Schema.Array(Schema.String).pipe(
      Schema.minItems(1, { message: () => "1 to 8 models" }),
      Schema.maxItems(8, { message: () => "1 to 8 models" }),
    ),
  ),
  model: Schema.optional(Schema.String),
  preset: Schema.optional(oneOf("general-high", "general-budget", "general-fast")),
  max_tool_calls: Schema.optionalWith(intBetween(1, 16), { default: () => 8 }),
  /** Omitted: the web tools the gateway has (web_search when `search` is configured, web_fetch); `[]`: no tools. */
  tools: Schema.optional(Schema.Array(FusionTool)),
})
type FusionEntry = typeof FusionPlugin.Type

export const fusionPlugin: RequestPlugin<"fusion", FusionEntry> = {
  id: "fusion",
  schema: FusionPlugin,
  // Without the route's inner calls (a test building the stages alone) it cannot run: refused, naming it.
  pre: ({ innerCalls, settings }) => (innerCalls === undefined ? notAvailable("fusion") : makeFusionStage({ innerCalls, settings })),
}

/** A request's model calls at most, while the gateway has no `server.max_upstream_calls` (the default). */
export const DEFAULT_MAX_UPSTREAM_CALLS = 64

export interface FusionPluginDeps {
  readonly innerCalls: InnerCalls
  readonly settings: Settings
}

/** A request's fusion run, once loaded. */
const runs = requestSlot<{ readonly run: FusionRun; readonly calls: number }>("fusion")

/** The last user message's text and where it is (undefined: the request has none). */
const lastUserMessage = (request: ResponsesRequest): { readonly text: string; readonly at: number } | undefined => {
  const input = request.input
  if (typeof input === "string") return input.trim() === "" ? undefined : { text: input, at: 0 }
  for (let i = (input?.length ?? 0) - 1; i >= 0; i--) {
    const item = input?.[i] as { role?: unknown; content?: unknown } | undefined
    if (item?.role !== "user") continue
    const text =
      typeof item.content === "string"
        ? item.content
        : Array.isArray(item.content)
          ? item.content
              .map((p) => (p as { text?: unknown }).text)
              .filter((t): t is string => typeof t === "string")
              .join("\n")
          : ""
    return text.trim() === "" ? undefined : { text, at: i }
  }
  return undefined
}

/** The request with the panel's answers and the analysis as a system message above its last user message. */
const withSynthesis = (request: ResponsesRequest, run: FusionRun, at: number): ResponsesRequest => {
  const system = { type: "message", role: "system", content: synthesisTextOf(run) } as unknown as InputItem
  const input = request.input
  const items: Array<InputItem> =
    typeof input === "string" ? [{ type: "message", role: "user", content: input } as unknown as InputItem] : [...(input ?? [])]
  items.splice(typeof input === "string" ? 0 : at, 0, system)
  return { ...request, input: items }
}

const entryOf = (run: FusionRun): PipelineEntry => ({
  type: "plugin",
  name: "fusion",
  summary:
    `${run.responses.length} of ${run.analysisModels.length} analysis models answered` +
    (run.analysis !== undefined ? `; ${run.judge} compared them` : `; no analysis (${run.failureReason})`),
  data: {
    analysis_models: run.analysisModels,
    model: run.judge,
    responses: run.responses.map((r) => ({ model: r.model, characters: r.content.length })),
    ...(run.analysis === undefined ? {} : { analysis: run.analysis }),
    ...(run.failedModels.length === 0 ? {} : { failed_models: run.failedModels }),
    ...(run.failureReason === undefined ? {} : { failure_reason: run.failureReason, error: run.error }),
    // Charged with each inner call's own generation record (parent_generation_id), not again with this one.
    cost: run.cost,
    generations: run.generations,
    ...(run.toolUse.toolCallsRequested === 0 ? {} : { tools: toolsEntryOf(run) }),
  },
})

/** The panel's tool use, for the pipeline entry (its `cost` is charged with the answer). */
const toolsEntryOf = (run: FusionRun) => {
  const use = run.toolUse
  return {
    tool_calls_requested: use.toolCallsRequested,
    tool_calls_executed: use.toolCallsExecuted,
    web_search_requests: use.webSearchRequests,
    ...(use.fetches === null ? {} : { fetches: use.fetches }),
    cost: use.cost,
    sources: use.sources,
  }
}

export const makeFusionStage = (deps: FusionPluginDeps): PreModelHalf<FusionEntry> => {
  const { innerCalls, settings } = deps
  const maxUpstreamCalls = settings.catalog.server?.max_upstream_calls ?? DEFAULT_MAX_UPSTREAM_CALLS

  const outcomeOf = (run: FusionRun, calls: number, state: StageState, at: number) => {
    if (run.responses.length === 0) {
      return new BadGateway({
        message: `plugins[${at}]: fusion: ${run.error ?? "every analysis model failed"}`,
        metadata: { failure_reason: run.failureReason ?? "all_panels_failed", failed_models: run.failedModels },
      })
    }
    const user = lastUserMessage(state.request)
    const use = run.toolUse
    return {
      request: withSynthesis(state.request, run, user?.at ?? 0),
      entry: entryOf(run),
      router: "fusion",
      upstreamCalls: calls,
      ...(use.cost > 0 ? { cost: use.cost } : {}),
      ...(use.sources.length > 0 ? { citable: use.sources } : {}),
    }
  }

  return {
    needsPlan: false,
    run: (config, state, at) => {
      const done = runs.get(state.loaded)
      if (done !== undefined) return outcomeOf(done.run, done.calls, state, at)
      const refuse = (rule: string) => new BadRequest({ message: `Invalid request: plugins[${at}].${rule}` })
      const tools = panelToolsOf(config.tools, config.max_tool_calls, settings, state.settings.disabledServerTools ?? [])
      if (typeof tools === "string") return refuse(tools)
      const problem = fusionAskProblem(config, settings.catalog.plugins?.fusion, settings.catalog.models)
      if (problem !== undefined) return refuse(problem)
      const choice = chooseFusion(config, settings.catalog.plugins?.fusion, state.request.model)
      if (typeof choice === "string") return refuse(choice)
      const user = lastUserMessage(state.request)
      if (user === undefined) return new BadRequest({ message: `Invalid request: plugins[${at}]: fusion needs a user message to put to the panel` })
      const loaded = state.loaded
      loaded.generationId ??= newGenerationId()
      const principal = state.principal
      const budget: UpstreamCallBudget = { used: 0, max: maxUpstreamCalls }
      const sessionId = state.request.session_id ?? state.headers.get("x-session-id")
      // Aborted when the load is interrupted: the request's deadline passed or its client left (route.ts).
      const stopped = new AbortController()
      const parent = {
        generationId: loaded.generationId,
        principal,
        sessionId: sessionId === null || sessionId === "" ? null : sessionId.slice(0, 256),
        storeContent: storesContent(state.settings, Number(principal.key.id)),
        // The request's deadline, or the load interrupted: a panel call in flight is cut and recorded
        // cancelled, and no judge is called after the client left.
        signal: AbortSignal.any([AbortSignal.timeout(settings.requestTimeoutMs), stopped.signal]),
        budget,
      }
      const panel = { ...tools, context: { settings, signal: parent.signal, workspaceId: principal.workspaceId }, budget }
      return new Missing(
        Effect.promise(async (interrupted) => {
          interrupted.addEventListener("abort", () => stopped.abort(), { once: true })
          const run = await runFusion(choice, user.text, (request, model) => innerCalls.call(request, model, parent), {}, panel)
          runs.set(loaded, { run, calls: budget.used })
        }),
      )
    },
  }
}
