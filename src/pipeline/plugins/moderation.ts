/**
 * The `moderation` plugin: the request's text is checked by an OpenAI-compatible moderation API
 * (`plugins.moderation` in config: `POST {base_url}/moderations`, `{model, input: [strings]}` →
 * `results[].flagged`, `categories`) before the model is called. Flagged → 403 with the flagged
 * categories and a guardrail-type pipeline entry `moderation`; the API failing or timing out fails
 * the request closed (503, Retry-After); the request's deadline passing first aborts the call (its
 * 408: pre-model.ts stops the load). With `enforce`, every request is checked and a request's
 * `enabled: false` cannot skip it. The call is made on the runtime as a read the stages miss
 * (`Missing`): its verdict is kept in the plugin's slot of the request's `Loaded`, and the stages run again.
 */
import { Effect, Schema } from "effect"
import type { ConfigFile, ModerationConfig, ProviderEntry } from "../../config/file.js"
import { type ApiError, BadRequest, Forbidden, ServiceUnavailable } from "../../domain/errors.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import { estimateTokens } from "../../domain/pricing.js"
import { AnyRecord } from "../../domain/schema-rules.js"
import { Missing, type PreModelStage, type StageState, withRecord } from "../stages.js"
import { pluginFields, type RequestPlugin, requestSlot } from "./plugin.js"

/** The moderation API's verdict on a request. */
export type ModerationVerdict =
  | { readonly kind: "clean"; readonly cost: number }
  | { readonly kind: "flagged"; readonly cost: number; readonly reasons: ReadonlyArray<string>; readonly input: string }
  | { readonly kind: "failed"; readonly reason: string }

/** The request's verdict, or the refusal of its budget check, in the request's own `Loaded`. */
const verdictOf = requestSlot<ModerationVerdict | ApiError>("moderation")

export const NOT_CONFIGURED = "moderation is not configured on this gateway"

/** Characters of the request's text sent to the API, at most (the rest is not moderated, as docs/plugins.md, "moderation" says). */
const MAX_MODERATED_CHARS = 200_000

/** The moderation API of the config, ready to call. */
export interface ModerationClient {
  readonly config: ModerationConfig
  readonly providerName: string
  /** USD the call costs for `texts` (0 when not priced). */
  readonly priceOf: (texts: ReadonlyArray<string>) => number
  /** `signal`: the request's stages stopped (its deadline passed, its client left): the call is aborted. */
  readonly check: (texts: ReadonlyArray<string>, signal?: AbortSignal) => Promise<ModerationVerdict>
}

const DEFAULT_TIMEOUT_MS = 5_000

export const makeModerationClient = (config: ModerationConfig, provider: ProviderEntry): ModerationClient => {
  const url = `${(provider.base_url ?? "").replace(/\/+$/, "")}/moderations`
  const apiKey = provider.api_key_env === undefined ? undefined : process.env[provider.api_key_env]
  const headers: Record<string, string> = { "content-type": "application/json", ...provider.headers }
  if (apiKey !== undefined) headers["authorization"] = `Bearer ${apiKey}`
  const priceOf = (texts: ReadonlyArray<string>) => {
    const p = config.pricing
    if (p === undefined) return 0
    const chars = texts.reduce((n, t) => n + t.length, 0)
    return (p.request ?? 0) + ((p.prompt ?? 0) * estimateTokens(chars)) / 1e6
  }
  const timeout = config.timeout_ms ?? DEFAULT_TIMEOUT_MS
  const check = async (texts: ReadonlyArray<string>, signal?: AbortSignal): Promise<ModerationVerdict> => {
    try {
      const res = await fetch(url, {
        method: "POST",
        headers,
        body: JSON.stringify({ model: config.model, input: texts }),
        signal: signal === undefined ? AbortSignal.timeout(timeout) : AbortSignal.any([signal, AbortSignal.timeout(timeout)]),
      })
      if (!res.ok) return { kind: "failed", reason: `the moderation API answered ${res.status}` }
      const body = (await res.json()) as { results?: unknown }
      if (!Array.isArray(body.results)) return { kind: "failed", reason: "the moderation API's answer has no results" }
      const cost = priceOf(texts)
      const reasons = new Set<string>()
      let input: string | undefined
      for (const [i, r] of (body.results as Array<{ flagged?: unknown; categories?: unknown }>).entries()) {
        if (r?.flagged !== true) continue
        input ??= texts[i] ?? texts.join("\n")
        if (typeof r.categories === "object" && r.categories !== null) {
          for (const [name, on] of Object.entries(r.categories)) if (on === true) reasons.add(name)
        }
      }
      return input === undefined ? { kind: "clean", cost } : { kind: "flagged", cost, reasons: [...reasons], input }
    } catch (e) {
      const timedOut = e instanceof Error && (e.name === "TimeoutError" || e.name === "AbortError")
      return { kind: "failed", reason: timedOut ? `the moderation API did not answer within ${timeout} ms` : "the moderation API could not be reached" }
    }
  }
  return { config, providerName: provider.id, priceOf, check }
}

/** The client of the config file's `plugins.moderation`, or undefined when it has none. */
export const moderationClientOf = (file: ConfigFile): ModerationClient | undefined => {
  const config = file.plugins?.moderation
  const provider = config === undefined ? undefined : file.providers.find((p) => p.id === config.provider)
  return config === undefined || provider === undefined ? undefined : makeModerationClient(config, provider)
}

/** At most 100 characters, the middle elided. */
export const elide = (text: string, max = 100): string => {
  if (text.length <= max) return text
  const keep = max - 1
  return `${text.slice(0, Math.ceil(keep / 2))}…${text.slice(text.length - Math.floor(keep / 2))}`
}

/** The request's texts, one per message or part (instructions first), capped in total. */
export const moderatedTexts = (request: ResponsesRequest): Array<string> => {
  const texts: Array<string> = []
  let total = 0
  const add = (t: string) => {
    if (t === "" || total >= MAX_MODERATED_CHARS) return
    const cut = t.slice(0, MAX_MODERATED_CHARS - total)
    total += cut.length
    texts.push(cut)
  }
  if (request.instructions != null) add(request.instructions)
  if (typeof request.input === "string") add(request.input)
  else {
    for (const item of request.input ?? []) {
      const content = (item as { content?: unknown }).content
      if (typeof content === "string") add(content)
      else if (Array.isArray(content)) {
        for (const part of content) {
          const text = (part as { text?: unknown }).text
          if (typeof text === "string") add(text)
        }
      }
      const output = (item as { output?: unknown }).output
      if (typeof output === "string") add(output)
    }
  }
  return texts
}

/** Reads the request's moderation needs (the plugin on, or enforced) and its verdict once loaded. */
export interface ModerationDeps {
  readonly client: ModerationClient | undefined
  /** A priced call's budget check: fails (402) when the key has no budget left for `usd`. */
  readonly holdBudget: (state: StageState, usd: number) => Effect.Effect<void, ApiError>
}

const pluginOn = (request: ResponsesRequest) => request.plugins?.some((p) => p.id === "moderation" && p.enabled !== false) === true

/** The fixed stage (after guardrails): runs when the plugin is on or the operator enforces it. */
export const makeModerationStage = (deps: ModerationDeps): PreModelStage => ({
  name: "moderation",
  needsPlan: false,
  run: (state) => {
    const client = deps.client
    if (client?.config.enforce !== true && !pluginOn(state.request)) return undefined
    if (client === undefined) return new BadRequest({ message: NOT_CONFIGURED })
    const loaded = state.loaded
    const verdict = verdictOf.get(loaded)
    if (verdict === undefined) {
      const texts = moderatedTexts(state.request)
      if (texts.length === 0) {
        verdictOf.set(loaded, { kind: "clean", cost: 0 })
        return undefined
      }
      const price = client.priceOf(texts)
      return new Missing(
        Effect.gen(function* () {
          if (price > 0) {
            const held = yield* Effect.either(deps.holdBudget(state, price))
            if (held._tag === "Left") return verdictOf.set(loaded, held.left)
          }
          // Interrupted (the request's deadline passed, its client left): the call is aborted.
          verdictOf.set(loaded, yield* Effect.promise((signal) => client.check(texts, signal)))
        }),
      )
    }
    const refused = moderationOutcome(state, client)
    if (refused !== undefined) return refused
    // A clean priced call is the stage's own spend: in the worst case and charged with the answer.
    const cost = "kind" in verdict && verdict.kind === "clean" ? verdict.cost : 0
    return cost > 0 ? { cost } : undefined
  },
})

/** The verdict → the request's refusal (403, 503) or undefined; read by the stage once loaded. */
export const moderationOutcome = (state: StageState, client: ModerationClient | undefined): ApiError | undefined => {
  const verdict = verdictOf.get(state.loaded)
  if (verdict === undefined || client === undefined) return undefined
  if ("_tag" in verdict) return verdict
  if (verdict.kind === "failed") {
    return new ServiceUnavailable({
      message: `Moderation is unavailable (${verdict.reason}); the request was not sent`,
      metadata: { provider_name: client.providerName, model_slug: client.config.model },
      retry_after: 5,
    })
  }
  if (verdict.kind === "clean") return undefined
  const summary = `Moderation flagged the request: ${verdict.reasons.join(", ") || "flagged"}`
  const entry = {
    type: "guardrail",
    name: "moderation",
    summary,
    data: { action: "blocked", detected: true, reasons: verdict.reasons, provider_name: client.providerName, model_slug: client.config.model },
  }
  const serviceMetadata = state.withMetadata ? { requested: state.request.model ?? null, summary, pipeline: [...(state.pipeline ?? []), entry] } : undefined
  const blocked = new Forbidden({
    message: `Request blocked: ${summary}`,
    metadata: {
      reasons: verdict.reasons,
      flagged_input: elide(verdict.input),
      provider_name: client.providerName,
      model_slug: client.config.model,
    },
    ...(serviceMetadata === undefined ? {} : { service_metadata: serviceMetadata }),
    ...(serviceMetadata !== undefined && state.metadataAlias ? { openrouter_metadata: serviceMetadata } : {}),
  })
  const session = state.request.session_id ?? state.headers.get("x-session-id")
  return withRecord(blocked, {
    model: state.request.model ?? "",
    providerName: client.providerName,
    modelSlug: client.config.model,
    cost: verdict.cost,
    sessionId: session === null || session === "" ? null : session.slice(0, 256),
  })
}

/** Its entry: `id`, `enabled`, every other field kept (the contract shows none). */
export const ModerationPlugin = Schema.Struct(pluginFields("moderation"), AnyRecord)

/** The plugin in `plugins`: the fixed moderation stage (pre-model.ts) runs it, since the operator may enforce it; no stage of its own. */
export const moderationPlugin: RequestPlugin<"moderation", typeof ModerationPlugin.Type> = {
  id: "moderation",
  schema: ModerationPlugin,
}
