/**
 * The `pareto-router` (model `router/pareto-code`, alias `openrouter/pareto-code`): among the
 * models whose `coding` score is at least `min_coding_score`, the cheapest (`price_source`:
 * prompt price or the weighted blend); with `max_price` (USD per million prompt tokens) the best
 * coding score at or under it. Fallbacks: the next two cheapest that meet the same threshold.
 * The choice is made by the model-router stage (model-router.ts), before routing.
 */
import { BadRequest } from "../../domain/errors.js"
import type { Plugin } from "../../domain/responses.js"
import type { Model } from "../../services/Catalog.js"
import type { PluginStage } from "./plugin.js"
import { type CandidateView, eligibleModels, priceOf, type RouterChoice, scoreOf } from "./router-common.js"

export type ParetoRouterConfig = Extract<Plugin, { readonly id: "pareto-router" }>

export const PARETO_MODELS: ReadonlySet<string> = new Set(["router/pareto-code", "openrouter/pareto-code"])

const DEFAULT_MIN_CODING = 0.66

/** The primary and two fallbacks; undefined when no model meets the threshold (and the price cap). */
export const choosePareto = (models: ReadonlyArray<Model>, config: ParetoRouterConfig | undefined): RouterChoice | undefined => {
  const min = config?.min_coding_score ?? DEFAULT_MIN_CODING
  const source = config?.price_source ?? "prompt"
  const maxPrice = config?.max_price
  const meeting = eligibleModels(models, models, config?.allowed_models, config?.excluded_models)
    .map((m) => ({ model: m, score: scoreOf(m, "coding"), price: priceOf(m, source), prompt: priceOf(m, "prompt") }))
    .filter((c) => c.score >= min)
    .sort((a, b) => a.price - b.price || b.score - a.score || a.model.id.localeCompare(b.model.id))
  const affordable = maxPrice === undefined ? meeting : meeting.filter((c) => c.prompt <= maxPrice)
  if (affordable.length === 0) return undefined
  // With a price cap: the best coding score under it (the cheaper on a tie); else the cheapest.
  const primary =
    maxPrice === undefined ? affordable[0] : [...affordable].sort((a, b) => b.score - a.score || a.price - b.price)[0]
  const chosen = [primary.model.id, ...affordable.filter((c) => c !== primary).slice(0, 2).map((c) => c.model.id)]
  const candidates: Array<CandidateView> = meeting.map((c) => ({ model: c.model.id, score: c.score, price: c.price }))
  return {
    models: chosen,
    summary: `Pareto router chose ${chosen[0]} (coding score ${primary.score}, ${primary.price} USD/M ${source}) among ${meeting.length} model(s) with coding ≥ ${min}`,
    data: {
      min_coding_score: min,
      price_source: source,
      ...(maxPrice === undefined ? {} : { max_price: maxPrice }),
      candidates,
      chosen: chosen[0],
      fallbacks: chosen.slice(1),
    },
  }
}

/** The plugin in `plugins`: its settings are read by the model-router stage; on another model it is refused. */
export const paretoRouterPlugin: PluginStage<"pareto-router"> = {
  id: "pareto-router",
  needsPlan: false,
  run: (_config, state, at) =>
    state.hints?.requested !== undefined && PARETO_MODELS.has(state.hints.requested)
      ? undefined
      : new BadRequest({
          message: `Invalid request: plugins[${at}]: pareto-router applies to the model router/pareto-code (or openrouter/pareto-code), not ${state.request.model ?? "the default model"}`,
        }),
}
