/**
 * Ingress: who is calling (from the headers, before a byte of the body is read) and what they
 * sent (the body parsed under the depth cap, then the client format's decoder → the one
 * normalized request). Plain code over reads the key store keeps in memory (no Effect per request); a key
 * not in memory is `Missing` and loaded on the runtime.
 */
import { Effect, Either, Option } from "effect"
import { type ApiError, BadRequest, Unauthorized } from "../domain/errors.js"
import { keyShaped } from "../domain/keys.js"
import type { ResponsesRequest } from "../domain/responses.js"
import { bearerSecret, INVALID_KEY, MISSING_CREDENTIALS, type PrincipalShape, principalOf } from "../services/Auth.js"
import { hashSecret, type KeyStore } from "../services/KeyStore.js"
import type { ClientFormat } from "../formats/format.js"
import { type Ingress, type Loaded, Missing } from "./stages.js"

/** Deeper bodies are refused: every later JSON.stringify of them would overflow the stack. */
export const MAX_JSON_DEPTH = 128

/**
 * Whether `value` nests objects/arrays deeper than `max` (iterative: no recursion on caller input).
 * Two parallel stacks and a `for…in`, no pair per node nor `Object.values` array per object: a
 * 10-message chat with a tool walks in ~0.65 µs instead of ~1.65 µs (Bun 1.4.5).
 */
const tooDeep = (value: unknown, max: number): boolean => {
  if (typeof value !== "object" || value === null) return false
  const nodes: Array<object> = [value]
  const depths: Array<number> = [0]
  while (nodes.length > 0) {
    const node = nodes.pop() as Record<string, unknown>
    const depth = depths.pop() as number
    if (depth >= max) return true
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child: unknown = node[i]
        if (typeof child === "object" && child !== null) {
          nodes.push(child)
          depths.push(depth + 1)
        }
      }
    } else {
      // A parsed object has only own, enumerable keys.
      for (const key in node) {
        const child = node[key]
        if (typeof child === "object" && child !== null) {
          nodes.push(child)
          depths.push(depth + 1)
        }
      }
    }
  }
  return false
}

/** A body as JSON no deeper than MAX_JSON_DEPTH, or the 400 (both planes parse bodies with it). */
export const parseJson = (text: string): Either.Either<unknown, BadRequest> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    return Either.left(new BadRequest({ message: "Malformed JSON in the request body" }))
  }
  return tooDeep(json, MAX_JSON_DEPTH)
    ? Either.left(new BadRequest({ message: `Invalid request: the body nests deeper than ${MAX_JSON_DEPTH} levels` }))
    : Either.right(json)
}

/**
 * The caller, from the headers alone: a key of the wrong shape, or one the store lately did not
 * know, is refused from memory. Anthropic's clients send the key as `x-api-key`; `Authorization`
 * wins when both are sent.
 */
export const authenticate = (keys: KeyStore, headers: Headers, loaded: Loaded): PrincipalShape | Unauthorized | Missing => {
  const authorization = headers.get("authorization")
  const secret = authorization === null ? (headers.get("x-api-key") ?? undefined) : bearerSecret(authorization)
  if (secret === undefined || secret === "") return new Unauthorized({ message: MISSING_CREDENTIALS })
  if (!keyShaped(secret)) return new Unauthorized({ message: INVALID_KEY })
  const hash = hashSecret(secret)
  const key = loaded.key?.hash === hash ? loaded.key : { row: keys.peekByHash(hash) }
  if (key.row === undefined && loaded.key === undefined && !keys.peekMissing(hash)) {
    return new Missing(
      Effect.map(keys.cachedByHash(hash), (row) => {
        loaded.key = { hash, row: Option.getOrUndefined(row) }
      }),
    )
  }
  // Decided again after a load: the key read now is the key of this request (one cache lookup each).
  loaded.key ??= { hash, row: key.row }
  const principal = principalOf(hash, key.row, Date.now())
  return Either.isLeft(principal) ? principal.left : principal.right
}

/**
 * The most input items (`input` or `messages` entries) one request may carry: 10,000, past the
 * longest agent conversations (a few thousand items), so only a hostile or broken client meets it.
 * Bounds the work every stage does per item and what one request holds the event loop: at the cap
 * a request of tiny items (its JSON parsed, decoded in slices, the upstream body encoded) holds it
 * some tens of ms, where 50,000 items held it ~150 ms (docs/plugins.md).
 */
export const MAX_INPUT_ITEMS = 10_000

/**
 * Items decoded in one slice of the event loop: ~15 µs an item through the Responses Schema (~3
 * through the Messages one), so a slice is ~30 ms and a longer list yields between slices instead
 * of holding the loop. Chat Completions messages (~1 µs) are decoded whole.
 */
export const DECODE_SLICE_ITEMS = 2_000

/** The request's list of items (Responses `input`, Chat and Messages `messages`), if it has one. */
const itemsIn = (body: unknown): { readonly key: string; readonly items: ReadonlyArray<unknown> } | undefined => {
  if (typeof body !== "object" || body === null) return undefined
  const { input, messages } = body as { readonly input?: unknown; readonly messages?: unknown }
  if (Array.isArray(input)) return { key: "input", items: input }
  if (Array.isArray(messages)) return { key: "messages", items: messages }
  return undefined
}

const nextTurnOfLoop = () => new Promise<void>((resolve) => setImmediate(resolve))

/**
 * A long list of items decoded slice by slice, the event loop served between slices: items
 * decode independently, so the request is the first slice's with every slice's `input` items in
 * order; a refusal names the item's index in the whole list.
 */
const decodeInSlices = async (
  format: ClientFormat,
  sliced: NonNullable<ClientFormat["slicedItems"]>,
  body: Record<string, unknown>,
  items: ReadonlyArray<unknown>,
): Promise<Ingress | ApiError> => {
  const rest: Record<string, unknown> = { ...body }
  for (const field of sliced.firstOnly ?? []) delete rest[field]
  const at = new RegExp(`^(Invalid request: ${sliced.key})\\[(\\d+)\\]`)
  let first: ResponsesRequest | undefined
  const decodedItems: Array<unknown> = []
  for (let from = 0; from < items.length; from += DECODE_SLICE_ITEMS) {
    if (from > 0) await nextTurnOfLoop()
    const decoded = format.decode({ ...(from === 0 ? body : rest), [sliced.key]: items.slice(from, from + DECODE_SLICE_ITEMS) })
    if (Either.isLeft(decoded)) {
      const e = decoded.left
      if (e._tag !== "BadRequest") return e
      return new BadRequest({ message: e.message.replace(at, (_, head, index) => `${head}[${Number(index) + from}]`) })
    }
    first ??= decoded.right
    for (const item of (decoded.right.input ?? []) as ReadonlyArray<unknown>) decodedItems.push(item)
  }
  return { body, request: { ...(first as ResponsesRequest), input: decodedItems as ResponsesRequest["input"] }, formatState: format.stateOf?.(body) }
}

/** More than MAX_INPUT_ITEMS items in the body's list (`input`, `messages`): the 400 naming it. */
const tooManyItems = (list: ReturnType<typeof itemsIn>): BadRequest | undefined =>
  list !== undefined && list.items.length > MAX_INPUT_ITEMS
    ? new BadRequest({ message: `Invalid request: ${list.key}: at most ${MAX_INPUT_ITEMS} items in one request, got ${list.items.length}` })
    : undefined

/** The item limit of a parsed body (routes that decode a body of their own, such as Messages' count_tokens). */
export const itemLimitOf = (body: unknown): BadRequest | undefined => tooManyItems(itemsIn(body))

/**
 * The body text → the normalized request, through `format`'s decoder, or the 400 naming the field
 * and the rule. More than MAX_INPUT_ITEMS items is refused before any decoding; a list longer than
 * a slice (Responses `input`, Messages `messages`) is decoded off the decision (`Missing`), into
 * `loaded.decoded`.
 */
export const decodeBody = (format: ClientFormat, bodyText: string, loaded: Loaded): Ingress | ApiError | Missing => {
  if (loaded.decoded !== undefined) return loaded.decoded
  const body = parseJson(bodyText)
  if (Either.isLeft(body)) return body.left
  const list = itemsIn(body.right)
  const tooMany = tooManyItems(list)
  if (tooMany !== undefined) return tooMany
  const sliced = format.slicedItems
  if (list !== undefined && sliced?.key === list.key && list.items.length > DECODE_SLICE_ITEMS) {
    const parsed = body.right as Record<string, unknown>
    return new Missing(
      Effect.promise(async () => {
        loaded.decoded = await decodeInSlices(format, sliced, parsed, list.items)
      }),
    )
  }
  const decoded = format.decode(body.right)
  if (Either.isLeft(decoded)) return decoded.left
  if (format.stateOf === undefined) return { body: body.right, request: decoded.right }
  return { body: body.right, request: decoded.right, formatState: format.stateOf(body.right) }
}
