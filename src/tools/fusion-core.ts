/**
 * Fusion (docs/fusion.md), shared by the `fusion` plugin and the `openrouter:fusion` server tool:
 * the analysis panel (1 to 8 models) answers the same user prompt in parallel, then the judge
 * compares the answers and returns JSON (`consensus`, `contradictions`, `partial_coverage`,
 * `unique_insights`, `blind_spots`), asked for with a JSON schema (`text.format` json_schema) and
 * healed with response-healing's repair when the model's JSON is broken. A panelist that fails is
 * listed and the rest go on; when all fail there is no judge call and the run is a failure with
 * `failure_reason` (the SDK's codes). The model calls themselves are inner calls (inner-calls.ts).
 *
 * With a `PanelSetup`, each panelist, and then the judge, answers with the panel's tools (web search,
 * web fetch) in a tool loop of its own (panel.ts); without one, or with no tools, from model knowledge.
 */
import type { FusionConfig } from "../config/file.js"
import { servesModel } from "../routing/model-id.js"
import type { ValidateFunction } from "ajv"
import { heal, loadHealing, validatorOf } from "../lib/json-healing.js"
import { answerWithTools, CALLS_AFTER_JUDGE, CALLS_AFTER_PANELIST, noToolUse, type PanelAnswer, type PanelSetup, type PanelToolUse, type RunModel } from "./panel.js"

export type { RunModel } from "./panel.js"

/** The analysis as the SDK's `FusionAnalysisResult` has it on the wire. */
export interface FusionAnalysis {
  readonly consensus: ReadonlyArray<string>
  readonly contradictions: ReadonlyArray<{ readonly topic: string; readonly stances: ReadonlyArray<{ readonly model: string; readonly stance: string }> }>
  readonly partial_coverage: ReadonlyArray<{ readonly point: string; readonly models: ReadonlyArray<string> }>
  readonly unique_insights: ReadonlyArray<{ readonly model: string; readonly insight: string }>
  readonly blind_spots: ReadonlyArray<string>
}

const strings = { type: "array", items: { type: "string" } } as const
const objectOf = (properties: Record<string, unknown>) => ({
  type: "object",
  additionalProperties: false,
  required: Object.keys(properties),
  properties,
})

/** The judge's answer schema (strict: every key required, no others). */
export const ANALYSIS_SCHEMA: Record<string, unknown> = objectOf({
  consensus: strings,
  contradictions: {
    type: "array",
    items: objectOf({ topic: { type: "string" }, stances: { type: "array", items: objectOf({ model: { type: "string" }, stance: { type: "string" } }) } }),
  },
  partial_coverage: { type: "array", items: objectOf({ point: { type: "string" }, models: strings }) },
  unique_insights: { type: "array", items: objectOf({ model: { type: "string" }, insight: { type: "string" } }) },
  blind_spots: strings,
})

/** The analysis schema's validator: compiled once, by the first judgement (response-healing's compiler, loaded then). */
let validateAnalysis: ValidateFunction | undefined
const analysisValidator = async (): Promise<ValidateFunction> => {
  if (validateAnalysis !== undefined) return validateAnalysis
  await loadHealing()
  const compiled = validatorOf(ANALYSIS_SCHEMA, "fusion analysis")
  if (typeof compiled === "string") throw new Error(compiled)
  validateAnalysis = compiled
  return compiled
}

export const JUDGE_INSTRUCTIONS = [
  "You compare answers that several AI models gave, independently, to the same question.",
  "Report, as JSON matching the given schema: the points they agree on (consensus); the points where they",
  "disagree, with each model's stance (contradictions); points only some of them cover, naming those models",
  "(partial_coverage); insights only one model gave (unique_insights); and what none of them addressed but",
  "should have (blind_spots). Name models exactly as the answers are headed. Do not answer the question yourself.",
].join(" ")

/** The typed failure reasons of the SDK's `openrouter:fusion` item. */
export type FailureReason =
  | "all_panels_failed"
  | "insufficient_credits"
  | "rate_limited"
  | "judge_not_valid_json"
  | "judge_schema_mismatch"
  | "judge_upstream_error"
  | "judge_empty_completion"
  | "cancelled"

export interface FailedModel {
  readonly model: string
  readonly error: string
  readonly status_code?: number
}

/** One fusion run's outcome. */
export interface FusionRun {
  readonly analysisModels: ReadonlyArray<string>
  readonly judge: string
  /** The panelists that answered, in the order asked. */
  readonly responses: ReadonlyArray<{ readonly model: string; readonly content: string }>
  readonly failedModels: ReadonlyArray<FailedModel>
  /** Absent when the run failed (`failureReason`). */
  readonly analysis?: FusionAnalysis
  readonly failureReason?: FailureReason
  readonly error?: string
  /** USD of every inner call (each charged with its own generation record). */
  readonly cost: number
  /** The panel's tool calls: their prices (charged with the request, not in `cost`), counts and pages. */
  readonly toolUse: PanelToolUse
  /** The inner calls' generation ids (panel first, then the judge). */
  readonly generations: ReadonlyArray<string>
}

/**
 * Progress of a run, for the stream's `response.fusion_call.*` events (the loop maps each to its
 * event with the item's id, output index and sequence number). Every method is optional.
 */
export interface FusionObserver {
  /** `response.fusion_call.panel.added` */
  readonly panelAdded?: (model: string) => void
  /** `response.fusion_call.panel.completed` */
  readonly panelCompleted?: (model: string, content: string) => void
  /** `response.fusion_call.panel.failed` */
  readonly panelFailed?: (model: string, error: string, statusCode: number | undefined) => void
  /** `response.fusion_call.analysis.in_progress` */
  readonly analysisInProgress?: (judge: string) => void
  /** `response.fusion_call.analysis.completed` */
  readonly analysisCompleted?: (analysis: FusionAnalysis) => void
}

export interface FusionChoice {
  readonly analysisModels: ReadonlyArray<string>
  readonly judge: string
}

/** What the caller asked for: the plugin's object or the tool's `parameters` (already checked). */
export interface FusionAsk {
  readonly analysis_models?: ReadonlyArray<string> | undefined
  readonly model?: string | undefined
  readonly preset?: string | undefined
}

/**
 * The panel and the judge: explicit `analysis_models` and `model` win over the preset's; a judge
 * named nowhere is `fallbackJudge` (the request's own model). A string: what is wrong, for a 400.
 */
export const chooseFusion = (ask: FusionAsk, config: FusionConfig | undefined, fallbackJudge: string | undefined): FusionChoice | string => {
  let preset: { readonly analysis_models: ReadonlyArray<string>; readonly model: string } | undefined
  if (ask.preset !== undefined) {
    preset = (config?.presets as Record<string, typeof preset> | undefined)?.[ask.preset]
    if (preset === undefined) return `preset: fusion preset ${ask.preset} is not configured on this gateway (plugins.fusion.presets)`
  }
  const analysisModels = ask.analysis_models ?? preset?.analysis_models
  if (analysisModels === undefined) return "analysis_models: 1 to 8 models, or a preset"
  const judge = ask.model ?? preset?.model ?? fallbackJudge
  if (judge === undefined) return "model: the judge model, or a preset"
  return { analysisModels, judge }
}

/** A catalog's model ids, built once per catalog (a fusion request's check is then a lookup per model). */
const idsOf = new WeakMap<ReadonlyArray<{ readonly id: string }>, ReadonlySet<string>>()
const knownIn = (models: ReadonlyArray<{ readonly id: string }>): ((id: string) => boolean) => {
  let ids = idsOf.get(models)
  if (ids === undefined) {
    ids = new Set(models.map((m) => m.id))
    idsOf.set(models, ids)
  }
  const set = ids
  return (id) => set.has(id)
}

/**
 * What makes a fusion ask fail before any model call, for a 400 at request time (the plugin and the
 * server tool alike): no panel at all, a preset the config does not have, an analysis model or a
 * judge the catalog does not serve (each of their calls would be a 404, the run a 502 or a failed
 * item). A routing suffix (`:nitro`, `:floor`, `:free`) is allowed, as in a request's `model`.
 */
export const fusionAskProblem = (ask: FusionAsk, config: FusionConfig | undefined, models: ReadonlyArray<{ readonly id: string }>): string | undefined => {
  if (ask.preset !== undefined && (config?.presets as Record<string, unknown> | undefined)?.[ask.preset] === undefined) {
    return `preset: fusion preset ${ask.preset} is not configured on this gateway (plugins.fusion.presets)`
  }
  if (ask.analysis_models === undefined && ask.preset === undefined) return "analysis_models: 1 to 8 models, or a preset"
  const known = knownIn(models)
  const panel = ask.analysis_models ?? []
  for (let i = 0; i < panel.length; i++) {
    const id = panel[i] as string
    if (!servesModel(id, known)) return `analysis_models[${i}]: model ${JSON.stringify(id)} is not in this gateway's catalog`
  }
  if (ask.model !== undefined && !servesModel(ask.model, known)) return `model: the judge ${JSON.stringify(ask.model)} is not in this gateway's catalog`
  return undefined
}

/** What the judge is given: the question and each answer under its model's name. */
export const judgeInputOf = (prompt: string, responses: FusionRun["responses"]): string =>
  [
    `Question:\n${prompt}`,
    ...responses.map((r, i) => `--- Answer ${i + 1}, by model ${r.model} ---\n${r.content}`),
  ].join("\n\n")

const judgeFailure = (result: Extract<PanelAnswer, { ok: false }>): FailureReason =>
  result.status === 402 ? "insufficient_credits" : result.status === 429 ? "rate_limited" : result.status === 499 ? "cancelled" : "judge_upstream_error"

/** The panel in parallel (with `panel`'s tools, if any), then the judge. Never rejects. */
export const runFusion = async (
  choice: FusionChoice,
  prompt: string,
  runModel: RunModel,
  observer: FusionObserver = {},
  panel?: PanelSetup,
): Promise<FusionRun> => {
  const { analysisModels, judge } = choice
  const toolUse = noToolUse()
  const answers = await Promise.all(
    analysisModels.map(async (model) => {
      observer.panelAdded?.(model)
      const answer = await answerWithTools({ input: prompt }, model, runModel, panel, toolUse, CALLS_AFTER_PANELIST)
      if (answer.ok && answer.text.trim() !== "") observer.panelCompleted?.(model, answer.text)
      else observer.panelFailed?.(model, answer.ok ? "the model gave an empty answer" : answer.error, answer.ok ? undefined : answer.status)
      return answer
    }),
  )
  const responses: Array<{ model: string; content: string }> = []
  const failedModels: Array<FailedModel> = []
  const generations: Array<string> = []
  let cost = 0
  for (const a of answers) {
    cost += a.cost
    generations.push(...a.generations)
    if (a.ok && a.text.trim() !== "") responses.push({ model: a.model, content: a.text })
    else if (a.ok) failedModels.push({ model: a.model, error: "the model gave an empty answer" })
    else failedModels.push({ model: a.model, error: a.error, status_code: a.status })
  }
  const base = { analysisModels, judge, responses, failedModels, generations, toolUse }
  if (responses.length === 0) {
    const statuses = new Set(failedModels.map((f) => f.status_code))
    const failureReason: FailureReason =
      statuses.size === 1 && statuses.has(402) ? "insufficient_credits" : statuses.size === 1 && statuses.has(499) ? "cancelled" : "all_panels_failed"
    return { ...base, cost, failureReason, error: `every analysis model failed (${failedModels.map((f) => `${f.model}: ${f.error}`).join("; ")})` }
  }

  const judgeAsk = {
    instructions: JUDGE_INSTRUCTIONS,
    input: judgeInputOf(prompt, responses),
    temperature: 0,
    text: { format: { type: "json_schema", name: "fusion_analysis", schema: ANALYSIS_SCHEMA, strict: true } },
  }
  observer.analysisInProgress?.(judge)
  // The judge may check the answers with the panel's tools before it answers (its calls in its own loop).
  const judged = await answerWithTools(judgeAsk, judge, runModel, panel, toolUse, CALLS_AFTER_JUDGE)
  cost += judged.cost
  generations.push(...judged.generations)
  if (!judged.ok) return { ...base, cost, failureReason: judgeFailure(judged), error: `the judge ${judge} failed: ${judged.error}` }
  if (judged.text.trim() === "") return { ...base, cost, failureReason: "judge_empty_completion", error: `the judge ${judge} gave an empty answer` }
  const healed = heal(judged.text, "json_schema", await analysisValidator())
  if (!healed.valid) {
    let parses = true
    try {
      JSON.parse(healed.text)
    } catch {
      parses = false
    }
    return parses
      ? { ...base, cost, failureReason: "judge_schema_mismatch", error: `the judge ${judge} answered JSON that does not match the analysis schema` }
      : { ...base, cost, failureReason: "judge_not_valid_json", error: `the judge ${judge} did not answer JSON` }
  }
  const analysis = JSON.parse(healed.text) as FusionAnalysis
  observer.analysisCompleted?.(analysis)
  return { ...base, cost, analysis }
}

/** The `openrouter:fusion` output item as the SDK validates it (without `id`: the loop gives it). */
export const fusionItemOf = (run: FusionRun): Record<string, unknown> => ({
  type: "openrouter:fusion",
  status: run.failureReason === undefined ? "completed" : "incomplete",
  responses: run.responses,
  ...(run.analysis === undefined ? {} : { analysis: run.analysis }),
  ...(run.failedModels.length === 0 ? {} : { failed_models: run.failedModels }),
  ...(run.failureReason === undefined ? {} : { failure_reason: run.failureReason, error: run.error }),
  ...(run.toolUse.sources.length === 0 ? {} : { sources: run.toolUse.sources }),
})

/** The panel and the analysis as text for the model that writes the final answer. */
export const synthesisTextOf = (run: FusionRun): string => {
  const parts = [
    "Several AI models answered the user's latest message independently (fusion). Their answers and an analysis",
    "of where they agree and differ follow. Write the final answer to the user from them: keep what the models",
    "agree on, resolve the contradictions where you can (say so where you cannot), and cover the blind spots.",
    "Do not mention this panel unless the user asks.",
    "",
    ...run.responses.map((r) => `### Answer by ${r.model}\n${r.content}\n`),
  ]
  if (run.analysis !== undefined) parts.push("### Analysis", JSON.stringify(run.analysis, null, 2))
  else if (run.error !== undefined) parts.push(`(No analysis: ${run.error}.)`)
  return parts.join("\n")
}
