/**
 * The `auto-router` (model `router/auto`, alias `openrouter/auto`): the prompt is classified
 * locally into a task type, and the eligible models are ranked by
 * `(1 − t/10) · score(task) − (t/10) · price rank` (t: `cost_quality_tradeoff`). The choice is
 * made by the model-router stage (model-router.ts), before routing; this plugin's own stage only
 * refuses the plugin on a request whose model is not the router.
 */
import { Schema } from "effect"
import type { ResponsesRequest } from "../../domain/responses.js"
import { intBetween, oneOf } from "../../domain/schema-rules.js"
import { requestText } from "../../services/Guardrails.js"
import type { Model } from "../../services/Catalog.js"
import { pluginFields, type RequestPlugin } from "./plugin.js"
import { type CandidateView, eligibleModels, onlyOnRouterModels, NONE_ELIGIBLE, priceOf, type RouterChoice, scoreOf } from "./router-common.js"

export const AutoRouterPlugin = Schema.Struct({
  ...pluginFields("auto-router"),
  allowed_models: Schema.optional(Schema.Array(Schema.String)),
  /** Glob patterns (e.g. `anthropic/*`), applied after `allowed_models`. */
  excluded_models: Schema.optional(Schema.Array(Schema.String)),
  cost_quality_tradeoff: Schema.optionalWith(intBetween(0, 10), { default: () => 7 }),
  /** Price quintile of the eligible models. */
  cost_tier: Schema.optional(oneOf("low", "medium", "high", "xhigh", "max")),
  /** Keep the session's last model even when the task type changed (while it is still eligible). */
  pin_model: Schema.optional(Schema.Boolean),
})
export type AutoRouterConfig = typeof AutoRouterPlugin.Type

export const AUTO_MODELS: ReadonlySet<string> = new Set(["router/auto", "openrouter/auto"])

/**
 * Task types and the signals that vote for each (plain heuristics over the last user text, its
 * first 4,000 characters): code fences and programming words → coding; arithmetic and math words →
 * math; "translate", "in French" → translation; "write a story/poem/essay/email" → writing;
 * "analyze", "compare", "summarize" → analysis; nothing → chat.
 */
const SIGNALS: ReadonlyArray<readonly [string, ReadonlyArray<RegExp>]> = [
  [
    "coding",
    [
      /```/,
      /\b(function|class|def|import|return|const|let|var|async|await|struct|enum)\b/,
      /\b(code|bug|debug|compile[rs]?|stack ?trace|exception|refactor|regex|sql|api|unit tests?)\b/,
      /\b(python|javascript|typescript|rust|golang|java|c\+\+|kotlin|swift|bash|html|css)\b/,
      /[{};]\s*$|=>|\(\)\s*\{/m,
    ],
  ],
  [
    "math",
    [
      /\d+\s*[+\-*/^×÷=]\s*\d+/,
      /\b(solve|equation|integral|derivative|prove|theorem|calculate|probability|matrix|algebra|geometry)\b/,
    ],
  ],
  ["translation", [/\btranslat(e|ion)\b/, /\b(in|into|to) (english|french|spanish|german|italian|japanese|chinese|portuguese|russian|korean)\b/]],
  ["writing", [/\b(write|draft|compose|rewrite)\b.{0,40}\b(story|poem|essay|email|letter|blog|article|post|song|speech)\b/, /\b(story|poem|essay)\b/]],
  ["analysis", [/\b(analy[sz]e|analysis|compare|comparison|summari[sz]e|evaluate|assess|pros and cons|trade-?offs?)\b/]],
]

/** The text the classifier reads: the last user message (the instructions and all input when none is found). */
const lastUserText = (request: ResponsesRequest): string => {
  const input = request.input
  if (typeof input === "string") return input
  for (let i = (input?.length ?? 0) - 1; i >= 0; i--) {
    const item = input?.[i] as { role?: unknown; content?: unknown } | undefined
    if (item?.role !== "user") continue
    if (typeof item.content === "string") return item.content
    if (Array.isArray(item.content)) {
      return item.content.map((p) => (p as { text?: unknown }).text).filter((t): t is string => typeof t === "string").join("\n")
    }
  }
  return requestText(request)
}

/** The prompt's task type: the type with the most signals, `chat` when none votes. */
export const classifyTask = (request: ResponsesRequest): string => {
  const text = lastUserText(request).slice(0, 4000).toLowerCase()
  let best = "chat"
  let votes = 0
  for (const [task, patterns] of SIGNALS) {
    let n = 0
    for (const p of patterns) if (p.test(text)) n++
    if (n > votes) {
      best = task
      votes = n
    }
  }
  return best
}

const TIERS = ["low", "medium", "high", "xhigh", "max"] as const

/** The session's last choice, for stickiness (`pinned`: kept even when the task type changed). */
export interface Remembered {
  readonly model: string
  readonly task: string
}

/**
 * Ranks the eligible models for `request`: the best first, then two fallbacks. `previous`: the
 * model this session was last routed to, kept first while eligible (always with `pin_model`, else
 * when the task type is the same). Undefined when none is eligible.
 */
export const chooseAuto = (
  models: ReadonlyArray<Model>,
  config: AutoRouterConfig | undefined,
  request: ResponsesRequest,
  previous: Remembered | undefined,
): (RouterChoice & { readonly task: string }) | undefined => {
  const task = classifyTask(request)
  const scored = models.filter((m) => m.entry.scores !== undefined)
  let eligible = eligibleModels(models, scored.length > 0 ? scored : models, config?.allowed_models, config?.excluded_models)
  if (eligible.length === 0) return undefined
  const priced = eligible.map((m) => ({ model: m, price: priceOf(m, "weighted_avg") })).sort((a, b) => a.price - b.price)
  if (config?.cost_tier !== undefined) {
    // Price quintiles of the eligible: the i-th cheapest of n is in tier round(4i / (n − 1)), so the
    // cheapest is always `low` and the dearest `max`; a single model is in every tier.
    const tier = TIERS.indexOf(config.cost_tier)
    const n = priced.length
    const kept = n === 1 ? priced : priced.filter((_, i) => Math.round((4 * i) / (n - 1)) === tier)
    if (kept.length === 0) return undefined
    priced.splice(0, priced.length, ...kept)
    eligible = kept.map((p) => p.model)
  }
  // Price rank: 0 for the cheapest price to 1 for the dearest, by distinct prices.
  const distinct = [...new Set(priced.map((p) => p.price))]
  const t = (config?.cost_quality_tradeoff ?? 7) / 10
  const ranked = priced
    .map(({ model, price }) => {
      const priceRank = distinct.length > 1 ? distinct.indexOf(price) / (distinct.length - 1) : 0
      const score = scoreOf(model, task)
      return { model, price, score, rank: (1 - t) * score - t * priceRank }
    })
    .sort((a, b) => b.rank - a.rank || a.price - b.price || a.model.id.localeCompare(b.model.id))
  const order = ranked.map((r) => r.model.id)
  let sticky = false
  if (previous !== undefined && (config?.pin_model === true || previous.task === task)) {
    const at = order.indexOf(previous.model)
    if (at >= 0) {
      order.unshift(...order.splice(at, 1))
      sticky = true
    }
  }
  const chosen = order.slice(0, 3)
  const candidates: Array<CandidateView> = ranked.map((r) => ({
    model: r.model.id,
    score: r.score,
    price: r.price,
    rank: Math.round(r.rank * 1e6) / 1e6,
  }))
  return {
    task,
    models: chosen,
    summary: `Auto router classified the prompt as ${task} and chose ${chosen[0]}${sticky ? " (the session's model)" : ""} among ${ranked.length} model(s)`,
    data: {
      task_type: task,
      cost_quality_tradeoff: config?.cost_quality_tradeoff ?? 7,
      ...(config?.cost_tier === undefined ? {} : { cost_tier: config.cost_tier }),
      candidates,
      chosen: chosen[0],
      fallbacks: chosen.slice(1),
      sticky,
    },
  }
}

export { NONE_ELIGIBLE }

/** The plugin in `plugins`: its settings are read by the model-router stage; on another model it is refused. */
export const autoRouterPlugin: RequestPlugin<"auto-router", AutoRouterConfig> = {
  id: "auto-router",
  schema: AutoRouterPlugin,
  pre: () => onlyOnRouterModels("auto-router", AUTO_MODELS, "router/auto (or openrouter/auto)"),
}
