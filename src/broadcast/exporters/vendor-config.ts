/**
 * A destination's stored config read back through its kind's Schema (the one that validated it
 * on the way in), so each exporter works with typed keys. A config that no longer decodes (it was
 * stored under an older, laxer rule) cannot be delivered: the exporter answers why, naming the key.
 */
import { createHash } from "node:crypto"
import { Either, ParseResult, type Schema } from "effect"
import { describeParseError } from "../../domain/validation.js"
import type { Delivery } from "../exporter.js"

// A kind's decoder is compiled once, on its first delivery.
const decoders = new WeakMap<Schema.Schema.AnyNoContext, (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>>()

const decoderFor = (schema: Schema.Schema.AnyNoContext) => {
  let decode = decoders.get(schema)
  if (decode === undefined) {
    decode = ParseResult.decodeUnknownEither(schema, { errors: "first" })
    decoders.set(schema, decode)
  }
  return decode
}

/** Runs `build` with the config typed by the kind's Schema, or answers `unsupported` naming the config key that fails. */
export const withConfig = async <S extends Schema.Schema.AnyNoContext>(
  schema: S,
  raw: Readonly<Record<string, unknown>>,
  build: (config: Schema.Schema.Type<S>) => Delivery | Promise<Delivery>,
): Promise<Delivery> => {
  const decoded = decoderFor(schema)(raw)
  if (Either.isLeft(decoded)) {
    return { unsupported: `config.${describeParseError(new ParseResult.ParseError({ issue: decoded.left }))}` }
  }
  return build(decoded.right as Schema.Schema.Type<S>)
}

/** `Basic base64(user:password)`. */
export const basicAuth = (user: string, password: string): string =>
  `Basic ${Buffer.from(`${user}:${password}`).toString("base64")}`

/**
 * A UUID (version-8 layout) derived from `text`: the same generation always gets the same id, so a
 * repeated delivery (at least once) is recognised by receivers that deduplicate on it.
 */
export const stableUuid = (text: string): string => {
  const h = createHash("sha256").update(text).digest("hex")
  const variant = ((Number.parseInt(h[16] ?? "0", 16) & 0x3) | 0x8).toString(16)
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-8${h.slice(13, 16)}-${variant}${h.slice(17, 20)}-${h.slice(20, 32)}`
}
