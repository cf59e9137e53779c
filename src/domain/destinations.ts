/**
 * Observability destinations, whatever their kind: the building blocks of a kind's config Schema,
 * what a kind declares to the control plane (`DestinationRules`: its config Schema, which keys
 * are secrets), and over those, validation, masking and merging, filter rules and the wire
 * shapes. The kinds themselves, each a module with its exporter, are listed in the registry on
 * the broadcast floor (src/broadcast/exporters/index.ts), which reaches the services as the
 * `DestinationKinds` table.
 */
import { Context, Either, ParseResult, Schema } from "effect"
import { regexProblem } from "./safe-regex.js"
import { BadRequest } from "./errors.js"
import { PageParams } from "./paging.js"
import { describeParseError } from "./validation.js"
import { charsAtMost, showable } from "./schema-rules.js"

export const REGIONS = ["global", "europe", "us"] as const
export const Region = Schema.Literal(...REGIONS).annotations({
  message: () => ({ message: `must be one of ${REGIONS.join(", ")}`, override: true }),
})

// ---- building blocks of a kind's config ----

export const CONFIG_VALUE_MAX = 4096

/** A non-empty string of at most CONFIG_VALUE_MAX characters. */
export const ConfigText = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  charsAtMost(CONFIG_VALUE_MAX),
)

export const isHttpUrl = (s: string) => {
  try {
    const u = new URL(s)
    return u.protocol === "http:" || u.protocol === "https:"
  } catch {
    return false
  }
}

export const ConfigUrl = ConfigText.pipe(Schema.filter((s) => isHttpUrl(s) || "must be an http(s) URL"))

/** An RFC 7230 token: what fetch accepts as a header name. */
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/

/** Headers the HTTP client sets itself from the request (framing, hop-by-hop): a tenant's value would break every delivery. */
const RESERVED_HEADERS: ReadonlyArray<string> = ["host", "content-length", "transfer-encoding", "connection", "keep-alive", "upgrade", "te", "trailer"]

/** Why a header is refused, or undefined: fetch refuses these names and values, so every delivery would fail. */
const headerProblem = (name: string, value: string): string | undefined => {
  if (name.length === 0) return "header names must not be empty"
  if (name.length > 256) return "header names have at most 256 characters"
  if (!HEADER_NAME.test(name)) return "is not a valid header name (letters, digits and !#$%&'*+-.^_`|~ only: no spaces or colons)"
  if (RESERVED_HEADERS.includes(name.toLowerCase())) return "is set by the gateway for each request: remove it"
  if (/[\r\n\0]/.test(value)) return "must not contain CR, LF or NUL"
  if (/[^\u0000-\u00ff]/.test(value)) return "must be Latin-1 text (encode other characters, e.g. percent-encoding)"
  return undefined
}

/**
 * A filter over a map of header names to values: the first one refused, as an issue at its name, or
 * true. Names are checked here rather than on a Record's key, where a refused key reads "unknown
 * key". A destination's headers and a provider's (config/file.ts) are held to it.
 */
export const headersAllowed = (headers: Readonly<Record<string, string>>): true | { readonly path: ReadonlyArray<string>; readonly message: string } => {
  for (const [name, value] of Object.entries(headers)) {
    const problem = headerProblem(name, value)
    if (problem !== undefined) return { path: [name], message: problem }
  }
  return true
}

/** A map of header names to values (a kind lists it in `secretMaps`: auth headers live there). */
export const ConfigHeaders = Schema.Record({
  key: Schema.String,
  value: Schema.String.annotations({ message: () => "must be a string" }).pipe(
    charsAtMost(CONFIG_VALUE_MAX),
  ),
})
  .annotations({ message: () => "must be an object of header names to string values" })
  .pipe(Schema.filter(headersAllowed))

/** A SQL identifier: quoted in the SQL text; the length cap keeps it sane. */
export const ConfigSqlIdentifier = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  charsAtMost(255),
)

/** One of `values`, refused with the list. */
export const configLiteral = <const L extends ReadonlyArray<string>>(values: L) =>
  Schema.Literal(...values).annotations({ message: () => ({ message: `must be one of ${values.join(", ")}`, override: true }) })

// ---- what a kind declares ----

/** A config key that names a receiver, as a URL: checked against the outbound policy. */
export interface ReceiverUrl {
  readonly key: string
  readonly url: string
}

/**
 * What the control plane needs of a destination kind: its config Schema and its secrets. The
 * kind's module (src/broadcast/exporters/<kind>.ts) adds its exporter.
 */
export interface DestinationRules {
  /** The `type` of its destinations. */
  readonly kind: string
  /** A Struct of its config keys: required keys are required; unknown keys are refused (so no secret is stored unrecognised). */
  readonly config: Schema.Schema.AnyNoContext
  /**
   * Config keys whose values are secrets: encrypted at rest, masked on the way out. Credentials
   * and anything that carries one (a DSN that embeds its key, an access key id that travels
   * with its secret).
   */
  readonly secretFields: ReadonlyArray<string>
  /** Config keys that are a map of header names to values, every value secret. */
  readonly secretMaps: ReadonlyArray<string>
  /** The receiver URLs its config names, when they are not just the values of RECEIVER_KEYS (see `configUrls`). */
  readonly receivers?: (config: DestinationConfig) => ReadonlyArray<ReceiverUrl>
}

/** The kinds this gateway knows, by name: the registry's (src/broadcast/exporters/index.ts), given to the services by the app. */
export class DestinationKinds extends Context.Tag("DestinationKinds")<DestinationKinds, ReadonlyMap<string, DestinationRules>>() {}

/** A plain (decrypted) config: string values, or a map of strings for `headers`. */
export type DestinationConfig = Readonly<Record<string, string | Readonly<Record<string, string>>>>

// A kind's decoder is compiled once, on its first config.
const configDecoders = new WeakMap<DestinationRules, (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>>()

const configDecoderOf = (rules: DestinationRules) => {
  let decode = configDecoders.get(rules)
  if (decode === undefined) {
    decode = ParseResult.decodeUnknownEither(rules.config, { errors: "first", onExcessProperty: "error" })
    configDecoders.set(rules, decode)
  }
  return decode
}

/** Validates a kind's config; the error names `config.<key>` and the rule. */
export const decodeConfig = (rules: DestinationRules, config: unknown): Either.Either<DestinationConfig, BadRequest> =>
  Either.mapBoth(configDecoderOf(rules)(config), {
    onLeft: (issue) => {
      const detail = describeParseError(new ParseResult.ParseError({ issue }))
      const named = detail.replace(/^(\S+): is unexpected.*$/, `$1: is not a setting of ${rules.kind} destinations`)
      return new BadRequest({ message: `Invalid request: config.${named}` })
    },
    onRight: (value) => value as DestinationConfig,
  })

/** The config keys whose values name a receiver, unless the kind says otherwise (`DestinationRules.receivers`). */
export const RECEIVER_KEYS = ["url", "endpoint", "baseUrl", "host", "apiUrl", "otlpEndpoint", "dsn"] as const

/** The values of RECEIVER_KEYS a config sets. */
export const receiverValues = (config: DestinationConfig): Array<ReceiverUrl> => {
  const out: Array<ReceiverUrl> = []
  for (const key of RECEIVER_KEYS) {
    const value = config[key]
    if (typeof value === "string") out.push({ key, url: value })
  }
  return out
}

/**
 * The receiver URLs a destination's config names (the keys a tenant sets; a vendor's default
 * host is public): each is checked against the outbound policy when the destination is created
 * or changed.
 */
export const configUrls = (rules: DestinationRules, config: DestinationConfig): ReadonlyArray<ReceiverUrl> =>
  rules.receivers === undefined ? receiverValues(config) : rules.receivers(config)

/** A secret shorter than this shows no character: 4 known of fewer than 16 leave too few to guess. */
const MASK_REVEAL_MIN = 16

/** `****EfGh`: the last 4 characters of a secret of 16 or more, else `****`. */
export const mask = (secret: string): string => (secret.length < MASK_REVEAL_MIN ? "****" : `****${secret.slice(-4)}`)

/** Query parameters whose values are taken for credentials (`api_key`, `access_token`, `X-Amz-Signature`, `sig`, …). */
const SECRET_PARAM = /key|token|secret|passw|pwd|sig|auth|credential|session/i

/**
 * A URL as it may be shown: the password of its userinfo masked (the user name too when it comes
 * alone: `https://<key>@host` carries its key there), and secret-looking query values masked.
 * Anything else, URL or not, is returned as is.
 */
export const maskUrl = (value: string): string => {
  let url: URL
  try {
    url = new URL(value)
  } catch {
    return value
  }
  const params = url.search.slice(1).split("&")
  const isSecret = (param: string) => param.indexOf("=") > 0 && SECRET_PARAM.test(param.slice(0, param.indexOf("=")))
  const secretParams = params.some(isSecret)
  if (url.username === "" && url.password === "" && !secretParams) return value
  if (url.password !== "") url.password = mask(url.password)
  else if (url.username !== "") url.username = mask(url.username)
  if (secretParams) {
    url.search = params
      .map((p) => {
        const at = p.indexOf("=")
        return isSecret(p) ? `${p.slice(0, at)}=${mask(p.slice(at + 1))}` : p
      })
      .join("&")
  }
  return url.toString()
}

/** The format shown before `mask` (first and last 4 characters), which a client may still hold. */
const earlierMask = (secret: string): string =>
  secret.length <= 8 ? "********" : `${secret.slice(0, 4)}...${secret.slice(-4)}`

/** Whether a value sent back is the stored secret as it is (or was) shown. */
const isMasked = (sent: unknown, secret: string): boolean => sent === mask(secret) || sent === earlierMask(secret)

/** The config as it may be shown: every secret value masked, and the credentials of URLs. */
export const maskConfig = (rules: DestinationRules, config: DestinationConfig): DestinationConfig => {
  const out: Record<string, string | Readonly<Record<string, string>>> = {}
  for (const [key, value] of Object.entries(config)) {
    if (typeof value === "string") out[key] = rules.secretFields.includes(key) ? mask(value) : maskUrl(value)
    else if (rules.secretMaps.includes(key)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, v]) => [name, mask(v)]))
    } else out[key] = value
  }
  return out
}

/**
 * A PATCH's config over the stored one: keys merge one by one (null removes an optional key);
 * a value sent back exactly as it is shown (a masked secret, a URL with its credentials masked)
 * keeps the stored value. A header map is replaced as a whole, except that a header value equal
 * to the masked stored value of the same header keeps the stored value.
 */
export const mergeConfig = (
  rules: DestinationRules,
  stored: DestinationConfig,
  patch: Readonly<Record<string, unknown>>,
): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...stored }
  for (const [key, value] of Object.entries(patch)) {
    const before = stored[key]
    if (value === null) delete out[key]
    else if (typeof before === "string" && (rules.secretFields.includes(key) ? isMasked(value, before) : value === maskUrl(before))) {
      out[key] = before
    } else if (
      rules.secretMaps.includes(key) &&
      typeof value === "object" &&
      !Array.isArray(value) &&
      typeof before === "object"
    ) {
      out[key] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([name, v]) => {
          const old = before[name]
          return [name, old !== undefined && isMasked(v, old) ? old : v]
        }),
      )
    } else out[key] = value
  }
  return out
}

// ---- filter rules ----

export const FILTER_FIELDS = [
  "model",
  "provider",
  "session_id",
  "user_id",
  "api_key_name",
  "finish_reason",
  "input",
  "output",
  "total_cost",
  "total_tokens",
  "prompt_tokens",
  "completion_tokens",
] as const

export const FILTER_OPERATORS = [
  "equals",
  "not_equals",
  "contains",
  "not_contains",
  "regex",
  "starts_with",
  "ends_with",
  "gt",
  "lt",
  "gte",
  "lte",
  "exists",
  "not_exists",
] as const

const NUMERIC_OPERATORS: ReadonlyArray<string> = ["gt", "lt", "gte", "lte"]

const FilterRule = Schema.Struct({
  field: Schema.Literal(...FILTER_FIELDS).annotations({
    message: () => ({ message: `must be one of ${FILTER_FIELDS.join(", ")}`, override: true }),
  }),
  operator: Schema.Literal(...FILTER_OPERATORS).annotations({
    message: () => ({ message: `must be one of ${FILTER_OPERATORS.join(", ")}`, override: true }),
  }),
  value: Schema.optional(Schema.Union(Schema.String, Schema.Number, Schema.Boolean, Schema.Null)),
}).pipe(
  Schema.filter((rule) => {
    if (rule.operator === "exists" || rule.operator === "not_exists") return true
    if (rule.value === undefined || rule.value === null) {
      return { path: ["value"], message: `is required with operator ${rule.operator}` }
    }
    if (NUMERIC_OPERATORS.includes(rule.operator) && (typeof rule.value !== "number" || !Number.isFinite(rule.value))) {
      return { path: ["value"], message: `must be a number with operator ${rule.operator}` }
    }
    if (rule.operator === "regex") {
      if (typeof rule.value !== "string") return { path: ["value"], message: "must be a string with operator regex" }
      const problem = regexProblem(rule.value)
      if (problem !== undefined) return { path: ["value"], message: problem }
    }
    return true
  }),
)

export const FilterRules = Schema.Struct({
  enabled: Schema.Boolean,
  groups: Schema.Array(
    Schema.Struct({
      logic: Schema.Literal("and", "or").annotations({ message: () => ({ message: "must be and or or", override: true }) }),
      rules: Schema.Array(FilterRule),
    }),
  ),
})
export type FilterRules = typeof FilterRules.Type

// ---- wire shapes ----

export const DestinationName = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  charsAtMost(100),
  showable,
)

export const SamplingRate = Schema.Number.pipe(
  Schema.finite({ message: () => "must be a finite number" }),
  Schema.between(0, 1, { message: () => "must be between 0 and 1" }),
)

const ConfigObject = Schema.Record({ key: Schema.String, value: Schema.Unknown }).annotations({
  message: () => ({ message: "must be an object", override: true }),
})

const settings = {
  enabled: Schema.optional(Schema.Boolean),
  privacy_mode: Schema.optional(Schema.Boolean),
  sampling_rate: Schema.optional(SamplingRate),
  api_key_hashes: Schema.optional(Schema.NullOr(Schema.Array(Schema.String))),
  filter_rules: Schema.optional(Schema.NullOr(FilterRules)),
  regions: Schema.optional(Schema.Array(Region)),
  broadcast_generation_cost: Schema.optional(Schema.Boolean),
  broadcast_generation_identity: Schema.optional(Schema.Boolean),
  broadcast_generation_request_context: Schema.optional(Schema.Boolean),
}

/** Where a destination's deliveries stand (an extension: extra keys are safe for clients). */
export const DeliveryStatus = Schema.Struct({
  last_success_at: Schema.NullOr(Schema.String),
  last_error: Schema.NullOr(Schema.String),
  last_error_at: Schema.NullOr(Schema.String),
  /** Deliveries waiting (including retries). */
  pending: Schema.Int,
  /** Deliveries that failed their last attempt (`POST …/redeliver` sends them again). */
  dead: Schema.Int,
})
export type DeliveryStatus = typeof DeliveryStatus.Type

/** `POST /observability/destinations/{id}/test`: the status class and a short reason, never the receiver's body. */
export const DestinationTestData = Schema.Struct({
  data: Schema.Struct({ ok: Schema.Boolean, status: Schema.Int, message: Schema.String }),
})

/** `POST /observability/destinations/{id}/redeliver`: how many dead deliveries were queued again. */
export const RedeliverData = Schema.Struct({ data: Schema.Struct({ requeued: Schema.Int }) })

/**
 * The wire shapes over the kinds a gateway knows (the API's are over the registry's,
 * src/http/api/destinations.ts): `type` is one of them, else "must be one of" the list.
 */
export const destinationWire = <const T extends string>(types: ReadonlyArray<T>) => {
  const DestinationType = Schema.Literal(...types).annotations({
    message: () => ({ message: `must be one of ${types.join(", ")}`, override: true }),
  })
  const CreateDestinationPayload = Schema.Struct({
    name: DestinationName,
    type: DestinationType,
    config: ConfigObject,
    ...settings,
    workspace_id: Schema.optional(Schema.String),
  })
  /** Every field optional; `config` merges into the stored one (see `mergeConfig`). */
  const UpdateDestinationPayload = Schema.Struct({
    name: Schema.optional(DestinationName),
    type: Schema.optional(DestinationType),
    config: Schema.optional(ConfigObject),
    ...settings,
  }).annotations({ parseOptions: { onExcessProperty: "error" } })
  const Destination = Schema.Struct({
    id: Schema.String,
    workspace_id: Schema.String,
    name: Schema.String,
    type: DestinationType,
    enabled: Schema.Boolean,
    privacy_mode: Schema.Boolean,
    sampling_rate: Schema.Number,
    api_key_hashes: Schema.NullOr(Schema.Array(Schema.String)),
    filter_rules: Schema.NullOr(FilterRules),
    /** Secret values masked. */
    config: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
    regions: Schema.Array(Region),
    broadcast_generation_cost: Schema.Boolean,
    broadcast_generation_identity: Schema.Boolean,
    broadcast_generation_request_context: Schema.Boolean,
    created_at: Schema.String,
    updated_at: Schema.String,
    delivery: Schema.optional(DeliveryStatus),
  })
  return {
    DestinationType,
    CreateDestinationPayload,
    UpdateDestinationPayload,
    Destination,
    DestinationData: Schema.Struct({ data: Destination }),
    DestinationList: Schema.Struct({ data: Schema.Array(Destination), total_count: Schema.Int }),
  } as const
}

/** The wire shapes with `type` any kind's name: what the services handle (the API has checked the name). */
type Wire = ReturnType<typeof destinationWire<string>>
export type CreateDestinationPayload = Wire["CreateDestinationPayload"]["Type"]
export type UpdateDestinationPayload = Wire["UpdateDestinationPayload"]["Type"]
export type Destination = Wire["Destination"]["Type"]

export const DestinationIdPath = Schema.Struct({ id: Schema.String })

export const ListDestinationsParams = Schema.Struct({ ...PageParams.fields, workspace_id: Schema.optional(Schema.String) })
