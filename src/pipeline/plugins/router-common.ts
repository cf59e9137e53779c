/**
 * What the auto and pareto routers share: the catalog models a request may be routed to
 * (`allowed_models` / `excluded_models` globs), a model's price and scores, and the outcome both
 * hand the model-router stage (model-router.ts).
 */
import picomatch from "picomatch"
import { BadRequest } from "../../domain/errors.js"
import type { Model } from "../../services/Catalog.js"
import type { PluginConfig, PreModelHalf } from "./plugin.js"

/** A model's score for a task type: 0-1 from the catalog's `scores`, 0.5 when it has none for it. */
export const scoreOf = (model: Model, task: string): number => model.entry.scores?.[task] ?? 0.5

/** USD per million tokens of the model's cheapest endpoint: its prompt price, or `(prompt + 3 × completion) / 4`. */
export const priceOf = (model: Model, source: "prompt" | "weighted_avg"): number => {
  let best = Number.POSITIVE_INFINITY
  for (const e of model.endpoints) {
    const p = source === "prompt" ? e.pricing.prompt : (e.pricing.prompt + 3 * e.pricing.completion) / 4
    if (p < best) best = p
  }
  return best
}

/** A list of glob patterns → one matcher of model ids (`anthropic/*`, `openai/gpt-4o*`). */
const matcherOf = (patterns: ReadonlyArray<string>): ((id: string) => boolean) => {
  const matchers = patterns.map((p) => picomatch(p, { nocase: true }))
  return (id) => matchers.some((m) => m(id))
}

/** The models `allowed` keeps (all of `fallback` when absent), less those `excluded` names. */
export const eligibleModels = (
  all: ReadonlyArray<Model>,
  fallback: ReadonlyArray<Model>,
  allowed: ReadonlyArray<string> | undefined,
  excluded: ReadonlyArray<string> | undefined,
): ReadonlyArray<Model> => {
  let list = fallback
  if (allowed !== undefined && allowed.length > 0) {
    const keep = matcherOf(allowed)
    list = all.filter((m) => keep(m.id))
  }
  if (excluded !== undefined && excluded.length > 0) {
    const out = matcherOf(excluded)
    list = list.filter((m) => !out(m.id))
  }
  return list
}

/** One candidate as the pipeline entry shows it. */
export interface CandidateView {
  readonly model: string
  readonly score: number
  /** USD per million tokens, as the router priced it. */
  readonly price: number
  /** The auto router's ranking value (absent for pareto). */
  readonly rank?: number
}

/** A router's choice: the primary, up to two fallbacks, and what the pipeline entry says. */
export interface RouterChoice {
  readonly models: ReadonlyArray<string>
  readonly summary: string
  readonly data: Record<string, unknown>
}

export const NONE_ELIGIBLE = "No models match your request and model restrictions"

/**
 * A router plugin's stage: its settings are read by the model-router stage (model-router.ts), so
 * here it only refuses a request whose model is not one of its router's (`models`, named `named`).
 */
export const onlyOnRouterModels = <Config extends PluginConfig>(id: string, models: ReadonlySet<string>, named: string): PreModelHalf<Config> => ({
  needsPlan: false,
  run: (_config, state, at) =>
    state.hints?.requested !== undefined && models.has(state.hints.requested)
      ? undefined
      : new BadRequest({ message: `Invalid request: plugins[${at}]: ${id} applies to the model ${named}, not ${state.request.model ?? "the default model"}` }),
})
