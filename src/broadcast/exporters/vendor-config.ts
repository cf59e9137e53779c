/**
 * A destination's stored config read back through its kind's Schema (the one that validated it
 * on the way in), so each exporter works with typed keys. A config that no longer decodes (it was
 * stored under an older, laxer rule) cannot be delivered: the exporter answers why, naming the key.
 */
import { createHash } from "node:crypto"
import { Either, ParseResult, type Schema } from "effect"
import { CONFIG_SCHEMAS, type DestinationType } from "../../domain/destinations.js"
import { describeParseError } from "../../domain/validation.js"
import type { Delivery } from "../exporter.js"

type ConfigOf<K extends DestinationType> = Schema.Schema.Type<(typeof CONFIG_SCHEMAS)[K]>

const decoders = new Map<DestinationType, (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>>()

const decoderFor = (kind: DestinationType) => {
  let decode = decoders.get(kind)
  if (decode === undefined) {
    decode = ParseResult.decodeUnknownEither(CONFIG_SCHEMAS[kind] as Schema.Schema<unknown, unknown>, { errors: "first" })
    decoders.set(kind, decode)
  }
  return decode
}

/** Runs `build` with the typed config of `kind`, or answers `unsupported` naming the config key that fails. */
export const withConfig = async <K extends DestinationType>(
  kind: K,
  raw: Readonly<Record<string, unknown>>,
  build: (config: ConfigOf<K>) => Delivery | Promise<Delivery>,
): Promise<Delivery> => {
  const decoded = decoderFor(kind)(raw)
  if (Either.isLeft(decoded)) {
    return { unsupported: `config.${describeParseError(new ParseResult.ParseError({ issue: decoded.left }))}` }
  }
  return build(decoded.right as ConfigOf<K>)
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
