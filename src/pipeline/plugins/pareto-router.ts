/**
 * The `pareto-router` (model `router/pareto-code`, alias `openrouter/pareto-code`): among the
 * models whose `coding` score is at least `min_coding_score`, the cheapest (`price_source`:
 * prompt price or the weighted blend), the next two cheapest as fallbacks; with `max_price` (USD
 * per million prompt tokens) the best coding scores at or under it, whatever their tier
 * (`min_coding_score` is not applied then).
 * The choice is made by the model-router stage (model-router.ts), before routing.
 */
import { Schema } from "effect"
import { oneOf } from "../../domain/schema-rules.js"
import type { Model } from "../../services/Catalog.js"
import { pluginFields, type RequestPlugin } from "./plugin.js"
import { type CandidateView, eligibleModels, onlyOnRouterModels, priceOf, type RouterChoice, scoreOf } from "./router-common.js"

export const ParetoRouterPlugin = Schema.Struct({
  ...pluginFields("pareto-router"),
  min_coding_score: Schema.optionalWith(
    Schema.Number.pipe(Schema.between(0, 1, { message: () => "must be a number from 0 to 1" })),
    { default: () => 0.66 },
  ),
  price_source: Schema.optionalWith(oneOf("prompt", "weighted_avg"), { default: () => "prompt" as const }),
  /** USD per million prompt tokens. */
  max_price: Schema.optional(Schema.Number.pipe(Schema.nonNegative({ message: () => "must be a number ≥ 0" }))),
  allowed_models: Schema.optional(Schema.Array(Schema.String)),
  excluded_models: Schema.optional(Schema.Array(Schema.String)),
})
export type ParetoRouterConfig = typeof ParetoRouterPlugin.Type

export const PARETO_MODELS: ReadonlySet<string> = new Set(["router/pareto-code", "openrouter/pareto-code"])

const DEFAULT_MIN_CODING = 0.66

/**
 * The primary and two fallbacks; undefined when no model qualifies. Without `max_price`: the
 * models whose coding score meets `min_coding_score`, cheapest first. With it, the tiers are
 * bypassed (as the API family documents): every eligible model at or under the price, best coding
 * score first (the cheaper on a tie), whatever its score; none under the price is the 404.
 */
export const choosePareto = (models: ReadonlyArray<Model>, config: ParetoRouterConfig | undefined): RouterChoice | undefined => {
  const min = config?.min_coding_score ?? DEFAULT_MIN_CODING
  const source = config?.price_source ?? "prompt"
  const maxPrice = config?.max_price
  const eligible = eligibleModels(models, models, config?.allowed_models, config?.excluded_models).map((m) => ({
    model: m,
    score: scoreOf(m, "coding"),
    price: priceOf(m, source),
    prompt: priceOf(m, "prompt"),
  }))
  const ranked =
    maxPrice === undefined
      ? eligible.filter((c) => c.score >= min).sort((a, b) => a.price - b.price || b.score - a.score || a.model.id.localeCompare(b.model.id))
      : eligible.filter((c) => c.prompt <= maxPrice).sort((a, b) => b.score - a.score || a.price - b.price || a.model.id.localeCompare(b.model.id))
  const primary = ranked[0]
  if (primary === undefined) return undefined
  const chosen = ranked.slice(0, 3).map((c) => c.model.id)
  const candidates: Array<CandidateView> = ranked.map((c) => ({ model: c.model.id, score: c.score, price: c.price }))
  const among = maxPrice === undefined ? `with coding ≥ ${min}` : `at or under ${maxPrice} USD/M prompt`
  return {
    models: chosen,
    summary: `Pareto router chose ${chosen[0]} (coding score ${primary.score}, ${primary.price} USD/M ${source}) among ${ranked.length} model(s) ${among}`,
    data: {
      ...(maxPrice === undefined ? { min_coding_score: min } : { max_price: maxPrice }),
      price_source: source,
      candidates,
      chosen: chosen[0],
      fallbacks: chosen.slice(1),
    },
  }
}

/** The plugin in `plugins`: its settings are read by the model-router stage; on another model it is refused. */
export const paretoRouterPlugin: RequestPlugin<"pareto-router", ParetoRouterConfig> = {
  id: "pareto-router",
  schema: ParetoRouterPlugin,
  pre: () => onlyOnRouterModels("pareto-router", PARETO_MODELS, "router/pareto-code (or openrouter/pareto-code)"),
}
