/**
 * The request's `provider` preferences as plain functions over catalog endpoints: filters
 * that say why they exclude an endpoint (for the 404 that names the filter), and the orders
 * (`sort` by price, throughput, latency or exacto; the default draw weighted by 1/price²).
 */
import { isFunctionTool, type ProviderPreferences, type ResponsesRequest } from "../domain/responses.js"
import type { Endpoint } from "../services/Catalog.js"
import type { ModelVariant } from "./model-id.js"

export type SortBy = "price" | "throughput" | "latency" | "exacto"

export interface EndpointFilter {
  /** How the filter reads in a message, e.g. `provider.only [a, b]`. */
  readonly label: string
  /** Why the endpoint is excluded, or undefined when it stays. */
  readonly reject: (e: Endpoint) => string | undefined
}

/** Rolling stats the throughput and latency sorts read (health.ts). */
export interface StatsSource {
  readonly latencyOf: (endpointId: string) => number | undefined
  readonly throughputOf: (endpointId: string) => number | undefined
}

const usd = (n: number) => `$${Number(n.toPrecision(6))}`

/** USD per million prompt plus completion tokens: the price the default draw and `sort: price` use. */
export const priceOf = (e: Endpoint) => e.pricing.prompt + e.pricing.completion

/** Provider slugs of `order`, `only`, `ignore` match a catalog provider id (any case) or an endpoint id. */
export const slugMatcher = (slugs: ReadonlyArray<string>) => {
  const set = new Set(slugs.map((s) => s.toLowerCase()))
  return (e: Endpoint) => set.has(e.provider.id.toLowerCase()) || set.has(e.id.toLowerCase())
}

/** Capabilities the request uses, for `require_parameters`. */
export const requiredCapabilities = (request: ResponsesRequest): ReadonlyArray<string> => {
  const needs: Array<string> = []
  if (request.tools?.some(isFunctionTool)) needs.push("tools")
  const format = request.text?.format?.type
  if (format === "json_schema" || format === "json_object") needs.push(format)
  const reasoning = request.reasoning
  if (reasoning != null && reasoning.enabled !== false && reasoning.effort !== "none") needs.push("reasoning")
  return needs
}

const freeFilter: EndpointFilter = {
  label: ":free (only endpoints priced zero)",
  reject: (e) =>
    priceOf(e) > 0 || (e.pricing.request ?? 0) > 0
      ? `priced ${usd(e.pricing.prompt)}/M prompt, ${usd(e.pricing.completion)}/M completion`
      : undefined,
}

/** The filters of one request, in the order they are reported. */
export const filtersOf = (
  prefs: ProviderPreferences | null | undefined,
  request: ResponsesRequest,
  variant: ModelVariant | undefined,
): ReadonlyArray<EndpointFilter> => {
  const filters: Array<EndpointFilter> = []
  if (variant === "free") filters.push(freeFilter)
  if (prefs == null) return filters
  if (prefs.only != null) {
    const listed = slugMatcher(prefs.only)
    filters.push({ label: `provider.only [${prefs.only.join(", ")}]`, reject: (e) => (listed(e) ? undefined : "not listed") })
  }
  if (prefs.ignore != null && prefs.ignore.length > 0) {
    const ignored = slugMatcher(prefs.ignore)
    filters.push({ label: `provider.ignore [${prefs.ignore.join(", ")}]`, reject: (e) => (ignored(e) ? "ignored" : undefined) })
  }
  if (prefs.order != null && prefs.order.length > 0 && prefs.allow_fallbacks === false) {
    const ordered = slugMatcher(prefs.order)
    filters.push({
      label: `provider.order [${prefs.order.join(", ")}] with allow_fallbacks: false`,
      reject: (e) => (ordered(e) ? undefined : "not in order"),
    })
  }
  if (prefs.quantizations != null && prefs.quantizations.length > 0) {
    const allowed = new Set(prefs.quantizations.map((q) => q.toLowerCase()))
    filters.push({
      label: `provider.quantizations [${prefs.quantizations.join(", ")}]`,
      reject: (e) => {
        const q = e.quantization?.toLowerCase() ?? "unknown"
        return allowed.has(q) ? undefined : `quantization ${q}`
      },
    })
  }
  if (prefs.data_collection === "deny") {
    filters.push({
      label: "provider.data_collection: deny",
      reject: (e) => (e.dataCollection === "allow" ? "may retain or train on prompts" : undefined),
    })
  }
  if (prefs.zdr === true) {
    filters.push({ label: "provider.zdr: true", reject: (e) => (e.zdr ? undefined : "no zero data retention") })
  }
  if (prefs.require_parameters) {
    const needs = requiredCapabilities(request)
    if (needs.length > 0) {
      filters.push({
        label: `provider.require_parameters (the request uses ${needs.join(", ")})`,
        reject: (e) => {
          const missing = needs.filter((n) => !e.supports.has(n))
          return missing.length === 0 ? undefined : `lacks ${missing.join(", ")}`
        },
      })
    }
  }
  const max = prefs.max_price
  if (max !== undefined && (max.prompt !== undefined || max.completion !== undefined || max.request !== undefined)) {
    const limits: Array<string> = []
    if (max.prompt !== undefined) limits.push(`prompt ≤ ${usd(max.prompt)}/M`)
    if (max.completion !== undefined) limits.push(`completion ≤ ${usd(max.completion)}/M`)
    if (max.request !== undefined) limits.push(`request ≤ ${usd(max.request)}`)
    filters.push({
      label: `provider.max_price (${limits.join(", ")})`,
      reject: (e) => {
        const over: Array<string> = []
        if (max.prompt !== undefined && e.pricing.prompt > max.prompt) over.push(`prompt ${usd(e.pricing.prompt)}/M`)
        if (max.completion !== undefined && e.pricing.completion > max.completion) {
          over.push(`completion ${usd(e.pricing.completion)}/M`)
        }
        const request = e.pricing.request ?? 0
        if (max.request !== undefined && request > max.request) over.push(`request ${usd(request)}`)
        return over.length === 0 ? undefined : `${over.join(", ")} over the maximum`
      },
    })
  }
  return filters
}

/** An endpoint with its position in catalog order, the last tie-breaker of every sort. */
export interface Ranked {
  readonly endpoint: Endpoint
  readonly index: number
}

const byPrice = (a: Ranked, b: Ranked) =>
  priceOf(a.endpoint) - priceOf(b.endpoint) ||
  (a.endpoint.pricing.request ?? 0) - (b.endpoint.pricing.request ?? 0) ||
  a.index - b.index

/** Known values first (best first); unknown ones after, by price then catalog order. */
const byStat =
  (read: (id: string) => number | undefined, higherIsBetter: boolean) =>
  (a: Ranked, b: Ranked) => {
    const x = read(a.endpoint.id)
    const y = read(b.endpoint.id)
    if (x !== undefined && y !== undefined) return (higherIsBetter ? y - x : x - y) || byPrice(a, b)
    if (x !== undefined) return -1
    if (y !== undefined) return 1
    return byPrice(a, b)
  }

const FULL_PRECISION: ReadonlySet<string> = new Set(["fp32", "fp16", "bf16"])

/** `exacto`: endpoints fit for exact tool calling first (declare tools, unquantized), then by price. */
const exactoRank = (e: Endpoint) =>
  (e.supports.has("tools") ? 0 : 2) + (e.quantization === undefined || FULL_PRECISION.has(e.quantization.toLowerCase()) ? 0 : 1)

export const sortRanked = (list: ReadonlyArray<Ranked>, by: SortBy, stats: StatsSource): Array<Ranked> => {
  const copy = [...list]
  switch (by) {
    case "price":
      return copy.sort(byPrice)
    case "throughput":
      return copy.sort(byStat(stats.throughputOf, true))
    case "latency":
      return copy.sort(byStat(stats.latencyOf, false))
    case "exacto":
      return copy.sort((a, b) => exactoRank(a.endpoint) - exactoRank(b.endpoint) || byPrice(a, b))
  }
}

/**
 * The default order: endpoints priced zero first (catalog order), then one endpoint drawn at
 * random with weight 1/price², then the rest by price as fallbacks.
 */
export const weightedRanked = (list: ReadonlyArray<Ranked>, random: () => number): Array<Ranked> => {
  const free = list.filter((r) => priceOf(r.endpoint) === 0)
  const priced = list.filter((r) => priceOf(r.endpoint) > 0).sort(byPrice)
  if (priced.length > 1) {
    const weights = priced.map((r) => 1 / priceOf(r.endpoint) ** 2)
    const total = weights.reduce((a, b) => a + b, 0)
    let point = random() * total
    let pick = priced.length - 1
    for (let i = 0; i < weights.length; i++) {
      point -= weights[i]
      if (point < 0) {
        pick = i
        break
      }
    }
    if (pick > 0) priced.unshift(...priced.splice(pick, 1))
  }
  return [...free, ...priced]
}
