/**
 * The `openrouter:fusion` server tool (docs/fusion.md): the model calls `fusion` with a prompt; the
 * panel answers it in parallel and the judge compares the answers (fusion-core.ts). The client
 * gets the SDK's `openrouter:fusion` item (`responses`, `analysis`, `failed_models`,
 * `failure_reason`, `error`); the model gets the same facts as JSON text to write its answer from.
 *
 * The tool makes model calls: it needs the loop to pass a `FusionToolContext` (inner calls and the
 * request they are made for). Each inner call is charged with its own generation record
 * (`parent_generation_id`), so it is not in the tool's `cost`; that is the price of the panel's own
 * tool calls (its searches), charged with the request as the loop's tool cost, and their counts go
 * to the request's usage and record (panel.ts).
 */
import { Either, Schema } from "effect"
import { intBetween } from "../domain/schema-rules.js"
import { describeParseError } from "../domain/validation.js"
import type { Settings } from "../config/Config.js"
import {
  chooseFusion,
  type FusionAnalysis,
  fusionAskProblem,
  type FusionObserver,
  type FusionRun,
  fusionItemOf,
  runFusion,
} from "./fusion-core.js"
import { type PanelTools, panelToolsOf } from "./panel.js"
import type { ModelCallingContext, ServerTool, ServerToolContext, ServerToolResult } from "./types.js"

/**
 * The SDK's `response.fusion_call.*` events between the item's `in_progress` and `completed`.
 * `judge_model` is the SDK's deprecated alias of `analyst_model`, still required by its schema.
 */
export type FusionProgress =
  | { readonly event: "panel.added"; readonly model: string }
  | { readonly event: "panel.completed"; readonly model: string; readonly content: string }
  | { readonly event: "panel.failed"; readonly model: string; readonly error: string; readonly status_code?: number }
  | { readonly event: "analysis.in_progress"; readonly analyst_model: string; readonly judge_model: string }
  | { readonly event: "analysis.completed"; readonly analysis: FusionAnalysis }

/**
 * What the fusion tool needs beside the common context; the loop passes it. `model`: the judge when
 * neither the tool's parameters nor a preset name one; `disabledServerTools`: the panel's default
 * tools leave them out.
 */
export type FusionToolContext = ModelCallingContext<FusionProgress>

/**
 * The run's progress as the SDK's `response.fusion_call.*` events, through the loop's `progress`.
 * `panel.delta` and `panel.reasoning.delta` are not sent: a panelist's answer comes whole (inner calls
 * are not streamed), so there are no deltas to relay honestly.
 */
const observerOf = (progress: ServerToolContext<FusionProgress>["progress"]): FusionObserver | undefined =>
  progress === undefined
    ? undefined
    : {
        panelAdded: (model) => progress({ event: "panel.added", model }),
        panelCompleted: (model, content) => progress({ event: "panel.completed", model, content }),
        panelFailed: (model, error, statusCode) =>
          progress(statusCode === undefined ? { event: "panel.failed", model, error } : { event: "panel.failed", model, error, status_code: statusCode }),
        analysisInProgress: (analyst) => progress({ event: "analysis.in_progress", analyst_model: analyst, judge_model: analyst }),
        analysisCompleted: (analysis) => progress({ event: "analysis.completed", analysis }),
      }

const hasInnerCalls = (ctx: ServerToolContext<FusionProgress>): ctx is FusionToolContext =>
  "innerCalls" in ctx && (ctx as Partial<FusionToolContext>).innerCalls !== undefined && (ctx as Partial<FusionToolContext>).parent !== undefined

const oneToEight = { message: () => "1 to 8 models" }

/**
 * The `parameters` of the request's `{type: "openrouter:fusion", parameters}` (the SDK's
 * FusionServerToolConfig, plus `preset`). Keys the gateway does not use (temperature, reasoning,
 * max_completion_tokens, cache_control) are accepted and ignored. `tools` is the SDK's
 * `{type, parameters?}` list; which tools the panel can use is checked by panel.ts.
 */
export const FusionToolParameters = Schema.Struct({
  analysis_models: Schema.optional(Schema.Array(Schema.String).pipe(Schema.minItems(1, oneToEight), Schema.maxItems(8, oneToEight))),
  model: Schema.optional(Schema.String),
  preset: Schema.optional(
    Schema.Literal("general-high", "general-budget", "general-fast").annotations({ message: () => "one of general-high, general-budget, general-fast" }),
  ),
  max_tool_calls: Schema.optional(intBetween(1, 16)),
  tools: Schema.optional(
    Schema.Array(Schema.Struct({ type: Schema.String, parameters: Schema.optional(Schema.Record({ key: Schema.String, value: Schema.Unknown })) })),
  ),
})
export type FusionToolParameters = typeof FusionToolParameters.Type

const decodeParameters = Schema.decodeUnknownEither(FusionToolParameters, { errors: "first" })

/** The tool's parameters, and the panel's tools they give on this gateway. */
export interface CheckedFusionParameters {
  readonly parameters: FusionToolParameters
  readonly panel: PanelTools
}

/**
 * The tool's `parameters` checked, or what is wrong with them ("analysis_models: 1 to 8 models",
 * "tools[0].type: …"): the request's decoder refuses such a tool with a 400 naming it.
 */
export const checkFusionParameters = (parameters: unknown, settings: Settings, disabled: ReadonlyArray<string> = []): CheckedFusionParameters | string => {
  const decoded = decodeParameters(parameters ?? {})
  if (Either.isLeft(decoded)) return describeParseError(decoded.left)
  const panel = panelToolsOf(decoded.right.tools, decoded.right.max_tool_calls, settings, disabled)
  return typeof panel === "string" ? panel : { parameters: decoded.right, panel }
}

const failedResult = (error: string): ServerToolResult => ({
  modelOutput: JSON.stringify({ error }),
  item: { type: "openrouter:fusion", status: "incomplete", error },
  cost: 0,
})

/** What the model is given: the panel's answers and the analysis (or why there is none). */
const modelOutputOf = (run: FusionRun): string =>
  JSON.stringify({
    responses: run.responses,
    ...(run.analysis === undefined ? {} : { analysis: run.analysis }),
    ...(run.failedModels.length === 0 ? {} : { failed_models: run.failedModels }),
    ...(run.error === undefined ? {} : { error: run.error }),
    ...(run.toolUse.sources.length === 0 ? {} : { sources: run.toolUse.sources }),
  })

/** The tool's result: the item, the model's text, and the panel's tool use for the request's usage and record. */
const resultOf = (run: FusionRun): ServerToolResult => {
  const use = run.toolUse
  return {
    modelOutput: modelOutputOf(run),
    item: fusionItemOf(run),
    cost: use.cost,
    ...(use.webSearchRequests === 0 ? {} : { searchRequests: use.webSearchRequests }),
    ...(use.searchResults === null ? {} : { searchResults: use.searchResults }),
    ...(use.fetches === null ? {} : { fetches: use.fetches }),
    ...(use.searchEngine === undefined ? {} : { searchEngine: use.searchEngine }),
    ...(use.sources.length === 0 ? {} : { citable: use.sources }),
  }
}

export const fusionTool: ServerTool<"openrouter:fusion", FusionProgress> = {
  type: "openrouter:fusion",
  name: "fusion",
  eventPrefix: "fusion_call",
  // At request time, as the plugin does: a preset or a model the run could never use is a 400, not a failed item of a 200.
  parametersProblem: (parameters, settings, disabled) => {
    const checked = checkFusionParameters(parameters, settings, disabled)
    if (typeof checked === "string") return checked
    return fusionAskProblem(checked.parameters, settings.catalog.plugins?.fusion, settings.catalog.models)
  },
  description:
    "Ask a panel of AI models the same question in parallel and get their answers with an analysis of where they agree, " +
    "contradict each other, and what they miss. Use it for hard or contested questions where several views help.",
  parameters: {
    type: "object",
    properties: { prompt: { type: "string", description: "The question to put to the panel, complete and self-contained." } },
    required: ["prompt"],
    additionalProperties: false,
  },
  unavailable: () => undefined,
  run: async (args, toolParameters, ctx) => {
    if (!hasInnerCalls(ctx)) return failedResult("fusion cannot make model calls here")
    const prompt = typeof args === "object" && args !== null ? (args as { prompt?: unknown }).prompt : undefined
    if (typeof prompt !== "string" || prompt.trim() === "") return failedResult("the call needs a prompt (a non-empty string)")
    const checked = checkFusionParameters(toolParameters, ctx.settings, ctx.disabledServerTools)
    if (typeof checked === "string") return failedResult(checked)
    const choice = chooseFusion(checked.parameters, ctx.settings.catalog.plugins?.fusion, ctx.model)
    if (typeof choice === "string") return failedResult(choice)
    const panel = { ...checked.panel, context: { settings: ctx.settings, signal: ctx.signal, workspaceId: ctx.workspaceId }, budget: ctx.parent.budget }
    const run = await runFusion(choice, prompt, (request, model) => ctx.innerCalls.call(request, model, ctx.parent), observerOf(ctx.progress), panel)
    return resultOf(run)
  },
}
