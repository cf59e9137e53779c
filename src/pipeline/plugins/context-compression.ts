/**
 * The `context-compression` plugin (engine `middle-out`, the only one): a prompt whose need (its
 * tokens plus the output bound) exceeds the context of the endpoint it goes to is made to fit.
 * Kept: system/developer messages, the first user message and the most recent messages; whole
 * items are dropped from the middle outward (a tool call never without its output); if that is
 * not enough, the middle of the largest text part is cut, with a marker saying how much. An
 * upstream's message-count cap (config, per provider) keeps half from the start, half from the end.
 *
 * It runs after the plugins and routing (fit step, `makeContextFit`), over the plan's candidates:
 * when some candidate fits, those that do not are dropped; when none does, compression targets
 * the first and a failover to a smaller context compresses again for it (`fitFor`, turns.ts).
 * On by default for endpoints whose context is ≤ `default_max_context` (8,192); otherwise on when
 * requested. Off, a prompt no candidate can take is a 400 before any upstream call.
 *
 * Counting: the UTF-8 bytes of the text are a true upper bound (a BPE token is at least a byte);
 * a request whose bound fits pays nothing more. Near the limit the text is counted with
 * gpt-tokenizer (o200k, loaded on first need) and a safety margin (15 % by default) for model
 * families whose tokenizer differs; text past `tokenizer_max_chars` per request is counted at
 * bytes ÷ 3 instead (the tokenizer runs on the event loop, ~3 MB/s).
 */
import { Effect, Schema } from "effect"
import { type ApiError, BadRequest } from "../../domain/errors.js"
import type { InputItem, ResponsesRequest } from "../../domain/responses.js"
import type { RoutePlan } from "../../routing/Router.js"
import type { Endpoint } from "../../services/Catalog.js"
import { outputBound, PROMPT_FRAMING_TOKENS, promptTokenBound } from "../bounds.js"
import type { PartAllowance } from "../../domain/pricing.js"
import { Missing, type PipelineEntry, type StageChange } from "../stages.js"
import { pluginFields, type RequestPlugin } from "./plugin.js"

export const ENGINE = "middle-out"

export interface CompressionSettings {
  /** Compression is on by default for endpoints whose context is at most this (0: never by default). */
  readonly defaultMaxContext: number
  /** Provider id → the most input items its upstream takes. */
  readonly maxMessages: ReadonlyMap<string, number>
  /** Added to the tokenizer's count (0.15: 15 %) for tokenizers that count differently. */
  readonly safetyMargin: number
  /** The most characters of one request given to the tokenizer. */
  readonly tokenizerMaxChars: number
}

export const DEFAULT_COMPRESSION: CompressionSettings = {
  defaultMaxContext: 8_192,
  maxMessages: new Map(),
  safetyMargin: 0.15,
  tokenizerMaxChars: 256 * 1024,
}

/** The settings from the config file's `plugins.context_compression`. */
export const compressionSettingsOf = (config?: {
  readonly default_max_context?: number | undefined
  readonly max_messages?: Readonly<Record<string, number>> | undefined
  readonly safety_margin?: number | undefined
  readonly tokenizer_max_chars?: number | undefined
}): CompressionSettings => ({
  defaultMaxContext: config?.default_max_context ?? DEFAULT_COMPRESSION.defaultMaxContext,
  maxMessages: new Map(Object.entries(config?.max_messages ?? {})),
  safetyMargin: config?.safety_margin ?? DEFAULT_COMPRESSION.safetyMargin,
  tokenizerMaxChars: config?.tokenizer_max_chars ?? DEFAULT_COMPRESSION.tokenizerMaxChars,
})

// ---------------------------------------------------------------------------------------------
// The plugin's own stage: it checks the engine; the work is the fit step after routing.
// ---------------------------------------------------------------------------------------------

export const ContextCompressionPlugin = Schema.Struct({
  ...pluginFields("context-compression"),
  engine: Schema.optional(Schema.String),
})

export const contextCompressionPlugin: RequestPlugin<"context-compression", typeof ContextCompressionPlugin.Type> = {
  id: "context-compression",
  schema: ContextCompressionPlugin,
  pre: () => ({
    needsPlan: false,
    run: (config, _state, at) =>
      config.engine === undefined || config.engine === ENGINE
        ? undefined
        : new BadRequest({ message: `Invalid request: plugins[${at}].engine: one of ${ENGINE}` }),
  }),
}

// ---------------------------------------------------------------------------------------------
// Counting
// ---------------------------------------------------------------------------------------------

let countTokens: ((text: string) => number) | undefined

/** gpt-tokenizer takes seconds to load: loaded on the first request that needs it. */
const loadTokenizer = Effect.promise(async () => {
  const module = await import("gpt-tokenizer/encoding/o200k_base")
  countTokens = module.countTokens
})

/** Per message: the role and the framing of the chat template. */
const ITEM_FRAMING = 4

type Counter = (text: string) => number

/** A counter for one request: the tokenizer while its character budget lasts, then bytes ÷ 3. */
const tokenCounter = (maxChars: number, tokenize: (text: string) => number): Counter => {
  let left = maxChars
  return (text) => {
    if (text.length === 0) return 0
    if (text.length <= left) {
      left -= text.length
      return tokenize(text)
    }
    return Math.ceil(Buffer.byteLength(text, "utf8") / 3)
  }
}

type Loose = Record<string, unknown>

/** The text parts of a content value (string or parts). */
const contentCost = (content: unknown, count: Counter, parts: PartAllowance): number => {
  if (typeof content === "string") return count(content)
  if (!Array.isArray(content)) return content == null ? 0 : count(JSON.stringify(content))
  let total = 0
  for (const part of content as ReadonlyArray<Loose>) {
    if (part.type === "input_text" || part.type === "output_text") total += count(String(part.text ?? ""))
    else if (part.type === "input_image") total += parts.maxTokensPerImage
    else if (part.type === "input_file") total += parts.maxTokensPerFile
    else if (part.type === "refusal") total += count(String(part.refusal ?? ""))
    else total += count(JSON.stringify(part))
  }
  return total
}

const itemCost = (item: InputItem, count: Counter, parts: PartAllowance): number => {
  const loose = item as unknown as Loose
  switch (item.type) {
    case "message":
      return ITEM_FRAMING + contentCost(loose.content, count, parts)
    case "function_call":
      return ITEM_FRAMING + count(`${String(loose.name ?? "")}${String(loose.arguments ?? "")}`)
    case "function_call_output":
      return ITEM_FRAMING + contentCost(loose.output, count, parts)
    default:
      return ITEM_FRAMING + count(JSON.stringify(item))
  }
}

/** The request's input as items (a string input is one user message). */
const itemsOf = (request: ResponsesRequest): ReadonlyArray<InputItem> => {
  const input = request.input
  if (input === undefined) return []
  if (typeof input === "string") return [{ type: "message", role: "user", content: input } as InputItem]
  return input
}

/** What every request carries beside its items: instructions, tools, the template's framing. */
const fixedCost = (request: ResponsesRequest, count: Counter): number =>
  PROMPT_FRAMING_TOKENS +
  (request.instructions == null ? 0 : count(request.instructions)) +
  (request.tools === undefined || request.tools.length === 0 ? 0 : count(JSON.stringify(request.tools)))

// ---------------------------------------------------------------------------------------------
// Middle-out
// ---------------------------------------------------------------------------------------------

/**
 * The output bound counted in the need: the caller's `max_output_tokens` whole; a bound the caller
 * did not set (the endpoint's, or the default 4,096) at most a quarter of the context, so an
 * endpoint whose default bound is as large as its context still takes a short prompt.
 */
const outputReserve = (request: ResponsesRequest, endpoint: Endpoint): number => {
  const total = outputBound(request, endpoint).total
  return request.max_output_tokens == null ? Math.min(total, Math.floor(endpoint.contextLength / 4)) : total
}

/** The most tokens of prompt `endpoint` takes for `request`: its context less the output reserve. */
const promptBudget = (request: ResponsesRequest, endpoint: Endpoint): number => {
  const room = endpoint.contextLength - outputReserve(request, endpoint)
  const cap = endpoint.entry.max_prompt_tokens
  return cap === undefined ? room : Math.min(room, cap)
}

interface Measured {
  readonly items: ReadonlyArray<InputItem>
  /** Each item's tokens (with the safety margin). */
  readonly costs: ReadonlyArray<number>
  /** Instructions, tools and framing (with the margin). */
  readonly fixed: number
  /** The prompt's tokens with the margin, and as the tokenizer counted them. */
  readonly total: number
  readonly raw: number
}

export interface Compressed {
  readonly request: ResponsesRequest
  readonly originalCount: number
  readonly compressedCount: number
  /** The prompt's tokens after compression (with the margin). */
  readonly tokens: number
  readonly fits: boolean
}

/** Units of items that go together: a function call and its output (by call_id). */
const unitsOf = (items: ReadonlyArray<InputItem>): Array<number> => {
  const unit = items.map((_, i) => i)
  const firstOfCall = new Map<string, number>()
  items.forEach((item, i) => {
    if (item.type !== "function_call" && item.type !== "function_call_output") return
    const callId = (item as unknown as Loose).call_id
    if (typeof callId !== "string") return
    const first = firstOfCall.get(callId)
    if (first === undefined) firstOfCall.set(callId, unit[i] as number)
    else unit[i] = first
  })
  return unit
}

const roleOf = (item: InputItem): string | undefined =>
  item.type === "message" ? ((item as unknown as Loose).role as string | undefined) : undefined

/** `text` with its middle cut so that about `cutChars` characters go, with a marker in their place. */
const cutMiddle = (text: string, cutChars: number): string => {
  const cut = Math.min(text.length, Math.max(1, cutChars))
  const head = Math.floor((text.length - cut) / 2)
  const tail = text.length - cut - head
  return `${text.slice(0, head)}\n[… ${cut} characters cut by context-compression …]\n${text.slice(text.length - tail)}`
}

interface TextSlot {
  readonly text: string
  readonly replace: (text: string) => void
}

/** Every text of the kept items and the instructions, with a way to put a cut one back. */
const textSlots = (items: Array<InputItem>, request: { instructions?: string | null | undefined }): Array<TextSlot> => {
  const slots: Array<TextSlot> = []
  if (typeof request.instructions === "string") {
    const text = request.instructions
    slots.push({
      text,
      replace: (t) => {
        request.instructions = t
      },
    })
  }
  items.forEach((item, i) => {
    const loose = item as unknown as Loose
    const key = item.type === "message" ? "content" : item.type === "function_call_output" ? "output" : undefined
    if (key === undefined) return
    const content = loose[key]
    if (typeof content === "string") {
      slots.push({
        text: content,
        replace: (t) => {
          items[i] = { ...loose, [key]: t } as unknown as InputItem
        },
      })
    } else if (Array.isArray(content)) {
      content.forEach((part: Loose, j) => {
        if ((part.type === "input_text" || part.type === "output_text") && typeof part.text === "string") {
          slots.push({
            text: part.text,
            replace: (t) => {
              const current = (items[i] as unknown as Loose)[key] as ReadonlyArray<Loose>
              const next = current.slice()
              next[j] = { ...part, text: t }
              items[i] = { ...(items[i] as unknown as Loose), [key]: next } as unknown as InputItem
            },
          })
        }
      })
    }
  })
  return slots
}

/**
 * `request` made to fit `budget` prompt tokens (and `cap` items), middle-out. `count` counts with
 * the margin. The result says whether it fits; the caller decides what a miss means.
 */
export const compress = (
  request: ResponsesRequest,
  measured: Measured,
  budget: number,
  cap: number | undefined,
  count: Counter,
): Compressed => {
  const { items, costs, fixed } = measured
  const n = items.length
  const keep = new Array<boolean>(n).fill(true)
  const units = unitsOf(items)
  // Each unit's items, so that dropping a unit costs its size: the whole pass stays O(n log n).
  const members = new Map<number, Array<number>>()
  for (let i = 0; i < n; i++) {
    const u = units[i] as number
    const list = members.get(u)
    if (list === undefined) members.set(u, [i])
    else list.push(i)
  }
  let total = fixed
  for (let i = 0; i < n; i++) total += costs[i] as number
  const dropUnit = (u: number) => {
    for (const i of members.get(u) ?? []) {
      if (!keep[i]) continue
      keep[i] = false
      total -= costs[i] as number
    }
  }
  // Protected: system/developer messages, the first user message, the last item (with its unit).
  const firstUser = items.findIndex((item) => roleOf(item) === "user")
  // A unit with a protected item is protected whole.
  const protectedUnit = new Set<number>()
  if (n > 0) protectedUnit.add(units[n - 1] as number)
  for (let i = 0; i < n; i++) {
    const role = roleOf(items[i] as InputItem)
    if (role === "system" || role === "developer" || i === firstUser) protectedUnit.add(units[i] as number)
  }

  // The upstream's message cap: half from the start, half from the end (units whole: a unit
  // that straddles the cut goes whole).
  if (cap !== undefined && n > cap) {
    const head = Math.floor(cap / 2)
    const tailFrom = n - (cap - head)
    for (let i = head; i < tailFrom; i++) dropUnit(units[i] as number)
  }

  if (total > budget) {
    // Middle-out over the droppable units, by distance from the middle of the conversation.
    const order: Array<number> = []
    const seen = new Set<number>()
    for (let i = 0; i < n; i++) {
      const u = units[i] as number
      if (!keep[i] || protectedUnit.has(u) || seen.has(u)) continue
      seen.add(u)
      order.push(u)
    }
    const middle = (n - 1) / 2
    order.sort((a, b) => Math.abs(a - middle) - Math.abs(b - middle) || a - b)
    for (const u of order) {
      if (total <= budget) break
      dropUnit(u)
    }
  }

  const kept: Array<InputItem> = []
  for (let i = 0; i < n; i++) if (keep[i]) kept.push(items[i] as InputItem)
  const out: { -readonly [K in keyof ResponsesRequest]: ResponsesRequest[K] } = { ...request }
  // Still over: cut the middle of the largest text part, a few times at most.
  for (let round = 0; round < 4 && total > budget; round++) {
    const slots = textSlots(kept, out)
    let largest: TextSlot | undefined
    for (const slot of slots) if (largest === undefined || slot.text.length > largest.text.length) largest = slot
    if (largest === undefined || largest.text.length < 64) break
    // Characters per token of the text as a whole, generous by a tenth so one round usually does.
    const excess = total - budget
    const before = count(largest.text)
    const charsPerToken = Math.max(1, largest.text.length / Math.max(1, before))
    const cut = cutMiddle(largest.text, Math.ceil(excess * charsPerToken * 1.1) + 64)
    largest.replace(cut)
    total += count(cut) - before
  }
  if (typeof request.input === "string") out.input = kept.length === 0 ? "" : contentText(kept[0] as InputItem)
  else out.input = kept
  return { request: out, originalCount: n, compressedCount: kept.length, tokens: total, fits: total <= budget }
}

const contentText = (item: InputItem): string => {
  const content = (item as unknown as Loose).content
  return typeof content === "string" ? content : JSON.stringify(content)
}

// ---------------------------------------------------------------------------------------------
// The fit step
// ---------------------------------------------------------------------------------------------

/** The compression of a request for a candidate it goes to (failover): undefined to send it as it is. */
export type FitFor = (endpoint: Endpoint) => ResponsesRequest | undefined

export interface FitChange extends StageChange {
  readonly fitFor?: FitFor
}

type Switch = "on" | "off" | "default"

const switchOf = (request: ResponsesRequest): Switch => {
  let state: Switch = "default"
  for (const p of request.plugins ?? []) if (p.id === "context-compression") state = p.enabled === false ? "off" : "on"
  return state
}

export const contextLengthExceeded = (need: number, prompt: number, endpoint: Endpoint): ApiError =>
  new BadRequest({
    message:
      `This request needs ${need} tokens (a prompt of ~${prompt} tokens plus the output bound of ${need - prompt}), ` +
      `more than the context of ${endpoint.contextLength} tokens of ${endpoint.modelId} (${endpoint.provider.id}). ` +
      `Shorten the prompt, lower max_output_tokens, or enable the context-compression plugin: "plugins": [{"id": "context-compression"}]`,
    metadata: { reason: "context_length_exceeded", need, context_length: endpoint.contextLength },
  })

/**
 * The fit step: `text` is what money counts (the body, or the request as the stages rewrote it),
 * `extra` input the body did not carry (a preset's instructions).
 */
export const makeContextFit = (settings: CompressionSettings, parts: PartAllowance) => {
  const onFor = (s: Switch, endpoint: Endpoint) =>
    s === "on" || (s === "default" && endpoint.contextLength <= settings.defaultMaxContext)
  const capOf = (endpoint: Endpoint) => settings.maxMessages.get(endpoint.provider.id)

  return (request: ResponsesRequest, plan: RoutePlan, text: string, extra: string): FitChange | ApiError | Missing | undefined => {
    const candidates = plan.candidates
    if (candidates.length === 0) return undefined
    const s = switchOf(request)
    const itemCount = typeof request.input === "string" ? 1 : (request.input?.length ?? 0)
    // The true upper bound: a request that fits every candidate by it pays nothing more.
    const upper = promptTokenBound(text, request, extra, parts)
    let boundFits = true
    for (const c of candidates) {
      const cap = capOf(c)
      if (upper > promptBudget(request, c) || (cap !== undefined && itemCount > cap && onFor(s, c))) {
        boundFits = false
        break
      }
    }
    if (boundFits) return undefined
    const tokenize = countTokens
    if (tokenize === undefined) return new Missing(loadTokenizer)

    // Counted twice over one budget of tokenizer text: raw (for refusals) and with the margin.
    const rawCount = tokenCounter(settings.tokenizerMaxChars, tokenize)
    const items = itemsOf(request)
    const rawCosts = items.map((item) => itemCost(item, rawCount, parts))
    const rawFixed = fixedCost(request, rawCount)
    let raw = rawFixed
    for (const c of rawCosts) raw += c
    const margin = 1 + settings.safetyMargin
    const withMargin = (tokens: number) => Math.ceil(tokens * margin)
    const measured: Measured = {
      items,
      costs: rawCosts.map(withMargin),
      fixed: withMargin(rawFixed),
      total: withMargin(raw),
      raw,
    }
    // The counter used while cutting text: the tokenizer, with the margin.
    const marginCount: Counter = (t) => withMargin(rawCount(t))

    const fits = (c: Endpoint) => {
      const cap = capOf(c)
      const on = onFor(s, c)
      if (on && cap !== undefined && items.length > cap) return false
      return (on ? measured.total : raw) <= promptBudget(request, c)
    }
    const fitting = candidates.filter(fits)
    // Some candidate takes the prompt as it is: the others are dropped. None does: every one
    // compression is on for stays, and the request is compressed for the first.
    const kept = fitting.length > 0 ? fitting : candidates.filter((c) => onFor(s, c))
    const first = candidates[0] as Endpoint
    if (kept.length === 0) return contextLengthExceeded(raw + outputReserve(request, first), raw, first)
    const narrowed = kept.length === candidates.length ? plan : { ...plan, candidates: kept }
    const target = kept[0] as Endpoint
    const compressFor = (c: Endpoint) => compress(request, measured, promptBudget(request, c), onFor(s, c) ? capOf(c) : undefined, marginCount)
    if (fits(target)) {
      if (narrowed === plan) return undefined
      // Later candidates were all kept because they fit: none needs compressing.
      return { plan: narrowed }
    }
    const done = compressFor(target)
    if (!done.fits) {
      const need = done.tokens + outputReserve(request, target)
      return contextLengthExceeded(need, done.tokens, target)
    }
    const entry: PipelineEntry = {
      type: "plugin",
      name: "context-compression",
      summary: `Compressed the prompt from ${done.originalCount} to ${done.compressedCount} input items (~${measured.total} → ~${done.tokens} tokens) to fit ${target.modelId} (${target.provider.id}, context ${target.contextLength})`,
      data: { engine: ENGINE, original_count: done.originalCount, compressed_count: done.compressedCount },
    }
    const fitFor: FitFor = (c) => (c === target ? undefined : fits(c) ? request : compressFor(c).request)
    return { request: done.request, plan: narrowed, entry, fitFor }
  }
}
