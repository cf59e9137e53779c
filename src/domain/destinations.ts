/**
 * Observability destinations: the 17 kinds of wire-compat with their config keys, which of
 * those keys are secrets (never returned, only masked), filter rules, and the wire shapes.
 */
import { Either, ParseResult, Schema } from "effect"
import { BadRequest } from "./errors.js"
import { PageParams } from "./paging.js"
import { describeParseError } from "./validation.js"

export const DESTINATION_TYPES = [
  "langfuse",
  "webhook",
  "otel-collector",
  "datadog",
  "langsmith",
  "posthog",
  "s3",
  "sentry",
  "clickhouse",
  "arize",
  "braintrust",
  "grafana",
  "newrelic",
  "opik",
  "ramp",
  "snowflake",
  "weave",
] as const

export const DestinationType = Schema.Literal(...DESTINATION_TYPES).annotations({
  message: () => ({ message: `must be one of ${DESTINATION_TYPES.join(", ")}`, override: true }),
})
export type DestinationType = typeof DestinationType.Type

export const REGIONS = ["global", "europe", "us"] as const
export const Region = Schema.Literal(...REGIONS).annotations({
  message: () => ({ message: `must be one of ${REGIONS.join(", ")}`, override: true }),
})

// ---- config per kind ----

export const CONFIG_VALUE_MAX = 4096

const Text = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(CONFIG_VALUE_MAX, { message: () => `at most ${CONFIG_VALUE_MAX} characters` }),
)

const isHttpUrl = (s: string) => {
  try {
    const u = new URL(s)
    return u.protocol === "http:" || u.protocol === "https:"
  } catch {
    return false
  }
}

const Url = Text.pipe(Schema.filter((s) => isHttpUrl(s) || "must be an http(s) URL"))

const Headers = Schema.Record({
  key: Schema.String.pipe(
    Schema.minLength(1, { message: () => "header names must not be empty" }),
    Schema.maxLength(256, { message: () => "header names have at most 256 characters" }),
  ),
  value: Schema.String.annotations({ message: () => "must be a string" }).pipe(
    Schema.maxLength(CONFIG_VALUE_MAX, { message: () => `at most ${CONFIG_VALUE_MAX} characters` }),
  ),
}).annotations({ message: () => "must be an object of header names to string values" })

const opt = <A, I>(s: Schema.Schema<A, I>) => Schema.optional(s)

/** `{traceId}`-like placeholders an S3 `pathTemplate` may use. */
export const S3_PATH_PLACEHOLDERS = ["prefix", "date", "year", "month", "day", "traceId", "generationId", "timestamp"] as const

const S3PathTemplate = Text.pipe(
  Schema.filter((template) => {
    const unknown = [...template.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]).find((name) => !(S3_PATH_PLACEHOLDERS as ReadonlyArray<string>).includes(name ?? ""))
    if (unknown !== undefined) return `{${unknown}} is not a placeholder (use ${S3_PATH_PLACEHOLDERS.map((p) => `{${p}}`).join(", ")})`
    if (!template.includes("{traceId}") && !template.includes("{generationId}")) return "must contain {traceId} or {generationId}, so traces do not overwrite each other"
    return true
  }),
)

// Names that become part of a host name must not be able to change the host (`evil.example#`).
const S3Bucket = Text.pipe(
  Schema.filter((b) => /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b) || "must be an S3 bucket name (3-63 of a-z, 0-9, dot, hyphen)"),
)
const AwsRegion = Text.pipe(Schema.filter((r) => /^[a-z0-9-]{1,32}$/.test(r) || "must be a region name like us-east-1 (a-z, 0-9, hyphen)"))
const SnowflakeAccount = Text.pipe(
  Schema.filter((a) => /^[A-Za-z0-9._-]{1,255}$/.test(a) || "must be an account identifier like xy12345.us-east-1 or myorg-myaccount"),
)

const isSentryDsn = (dsn: string) => {
  try {
    const u = new URL(dsn)
    return (u.protocol === "http:" || u.protocol === "https:") && u.username !== ""
  } catch {
    return false
  }
}
const SentryDsn = Text.pipe(Schema.filter((d) => isSentryDsn(d) || "must be a Sentry DSN (https://<public key>@<host>/<project id>)"))

// ClickHouse's HTTP interface: a URL, or host[:port] (then https, port 8443 when none is given).
const isClickHouseHost = (host: string) =>
  /^https?:\/\//.test(host) ? isHttpUrl(host) : /^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(host)
const ClickHouseHost = Text.pipe(
  Schema.filter((h) => isClickHouseHost(h) || "must be an http(s) URL or host[:port] of the HTTP interface"),
)
// Identifiers are quoted in the SQL text; the length cap keeps them sane.
const SqlIdentifier = Schema.String.pipe(
  Schema.minLength(1, { message: () => "must not be empty" }),
  Schema.maxLength(255, { message: () => "at most 255 characters" }),
)

export const DATADOG_SITES = [
  "datadoghq.com",
  "us3.datadoghq.com",
  "us5.datadoghq.com",
  "datadoghq.eu",
  "ap1.datadoghq.com",
  "ap2.datadoghq.com",
  "uk1.datadoghq.com",
] as const
const literal = <const L extends ReadonlyArray<string>>(values: L) =>
  Schema.Literal(...values).annotations({ message: () => ({ message: `must be one of ${values.join(", ")}`, override: true }) })

/** Each kind's config: required keys are required; unknown keys are refused (so no secret is stored unrecognised). */
export const CONFIG_SCHEMAS = {
  langfuse: Schema.Struct({ publicKey: Text, secretKey: Text, baseUrl: opt(Url) }),
  webhook: Schema.Struct({
    url: Url,
    method: opt(Schema.Literal("POST", "PUT").annotations({ message: () => ({ message: "must be POST or PUT", override: true }) })),
    headers: opt(Headers),
  }),
  "otel-collector": Schema.Struct({ endpoint: Url, headers: opt(Headers) }),
  datadog: Schema.Struct({ apiKey: Text, mlApp: Text, site: opt(literal(DATADOG_SITES)) }),
  langsmith: Schema.Struct({ apiKey: Text, project: opt(Text), endpoint: opt(Url) }),
  posthog: Schema.Struct({ apiKey: Text, host: opt(Url) }),
  s3: Schema.Struct({
    accessKeyId: Text,
    secretAccessKey: Text,
    bucketName: S3Bucket,
    region: opt(AwsRegion),
    endpoint: opt(Url),
    prefix: opt(Text),
    pathTemplate: opt(S3PathTemplate),
    sessionToken: opt(Text),
  }),
  sentry: Schema.Struct({ dsn: SentryDsn, otlpEndpoint: Url }),
  clickhouse: Schema.Struct({ host: ClickHouseHost, database: Text, username: Text, password: Text, table: opt(SqlIdentifier) }),
  arize: Schema.Struct({ apiKey: Text, spaceKey: Text, modelId: Text, endpoint: opt(Url) }),
  braintrust: Schema.Struct({ apiKey: Text, projectId: Text, apiUrl: opt(Url) }),
  grafana: Schema.Struct({ apiKey: Text, instanceId: Text, endpoint: opt(Url) }),
  newrelic: Schema.Struct({ licenseKey: Text, region: opt(literal(["us", "eu"])) }),
  opik: Schema.Struct({ apiKey: Text, projectName: Text, workspace: Text, baseUrl: opt(Url) }),
  ramp: Schema.Struct({ apiKey: Text }),
  snowflake: Schema.Struct({
    account: SnowflakeAccount,
    token: Text,
    tokenType: opt(literal(["PROGRAMMATIC_ACCESS_TOKEN", "OAUTH", "KEYPAIR_JWT"])),
    database: opt(SqlIdentifier),
    schema: opt(SqlIdentifier),
    table: opt(SqlIdentifier),
    warehouse: opt(SqlIdentifier),
    role: opt(SqlIdentifier),
  }),
  weave: Schema.Struct({ apiKey: Text, entity: Text, project: Text, baseUrl: opt(Url) }),
} as const satisfies Record<DestinationType, Schema.Schema.Any>

/**
 * Config keys whose values are secrets: encrypted at rest, masked on the way out. Credentials
 * and anything that carries one (a Sentry DSN embeds its key; langfuse's public key comes back
 * masked in the reference samples; the access key id of S3 travels with its secret). `headers`
 * (webhook, otel-collector) is secret value by value: auth headers live there.
 */
export const SECRET_FIELDS: Record<DestinationType, ReadonlyArray<string>> = {
  langfuse: ["publicKey", "secretKey"],
  webhook: [],
  "otel-collector": [],
  datadog: ["apiKey"],
  langsmith: ["apiKey"],
  posthog: ["apiKey"],
  s3: ["accessKeyId", "secretAccessKey", "sessionToken"],
  sentry: ["dsn"],
  clickhouse: ["password"],
  arize: ["apiKey"],
  braintrust: ["apiKey"],
  grafana: ["apiKey"],
  newrelic: ["licenseKey"],
  opik: ["apiKey"],
  ramp: ["apiKey"],
  snowflake: ["token"],
  weave: ["apiKey"],
}

/** Config keys that are a map of header names to values, every value secret. */
export const SECRET_MAPS: Record<DestinationType, ReadonlyArray<string>> = {
  langfuse: [],
  webhook: ["headers"],
  "otel-collector": ["headers"],
  datadog: [],
  langsmith: [],
  posthog: [],
  s3: [],
  sentry: [],
  clickhouse: [],
  arize: [],
  braintrust: [],
  grafana: [],
  newrelic: [],
  opik: [],
  ramp: [],
  snowflake: [],
  weave: [],
}

/** A plain (decrypted) config: string values, or a map of strings for `headers`. */
export type DestinationConfig = Readonly<Record<string, string | Readonly<Record<string, string>>>>

const configDecoders = Object.fromEntries(
  DESTINATION_TYPES.map((t) => [
    t,
    ParseResult.decodeUnknownEither(CONFIG_SCHEMAS[t] as Schema.Schema<unknown, unknown>, {
      errors: "first",
      onExcessProperty: "error",
    }),
  ]),
) as Record<DestinationType, (u: unknown) => Either.Either<unknown, ParseResult.ParseIssue>>

/** Validates a kind's config; the error names `config.<key>` and the rule. */
export const decodeConfig = (type: DestinationType, config: unknown): Either.Either<DestinationConfig, BadRequest> =>
  Either.mapBoth(configDecoders[type](config), {
    onLeft: (issue) => {
      const detail = describeParseError(new ParseResult.ParseError({ issue }))
      const named = detail.replace(/^(\S+): is unexpected.*$/, `$1: is not a setting of ${type} destinations`)
      return new BadRequest({ message: `Invalid request: config.${named}` })
    },
    onRight: (value) => value as DestinationConfig,
  })

/**
 * The receiver URLs a destination's config names (the keys a tenant sets; a vendor's default
 * host is public): each is checked against the outbound policy when the destination is created
 * or changed. A ClickHouse `host[:port]` is reached over https.
 */
export const configUrls = (type: DestinationType, config: DestinationConfig): ReadonlyArray<{ readonly key: string; readonly url: string }> => {
  const out: Array<{ key: string; url: string }> = []
  for (const key of ["url", "endpoint", "baseUrl", "host", "apiUrl", "otlpEndpoint", "dsn"]) {
    const value = config[key]
    if (typeof value !== "string") continue
    out.push({ key, url: type === "clickhouse" && !/^https?:\/\//.test(value) ? `https://${value}` : value })
  }
  return out
}

/** `pk-l...EfGh`: the first and last 4 characters; 8 characters or fewer are fully masked. */
export const mask = (secret: string): string =>
  secret.length <= 8 ? "********" : `${secret.slice(0, 4)}...${secret.slice(-4)}`

/** The config as it may be shown: every secret value masked. */
export const maskConfig = (type: DestinationType, config: DestinationConfig): DestinationConfig => {
  const out: Record<string, string | Readonly<Record<string, string>>> = {}
  for (const [key, value] of Object.entries(config)) {
    if (typeof value === "string") out[key] = SECRET_FIELDS[type].includes(key) ? mask(value) : value
    else if (SECRET_MAPS[type].includes(key)) {
      out[key] = Object.fromEntries(Object.entries(value).map(([name, v]) => [name, mask(v)]))
    } else out[key] = value
  }
  return out
}

/**
 * A PATCH's config over the stored one: keys merge one by one (null removes an optional key);
 * a secret sent back exactly in its masked form keeps the stored secret. A header map is
 * replaced as a whole, except that a header value equal to the masked stored value of the
 * same header keeps the stored value.
 */
export const mergeConfig = (
  type: DestinationType,
  stored: DestinationConfig,
  patch: Readonly<Record<string, unknown>>,
): Record<string, unknown> => {
  const out: Record<string, unknown> = { ...stored }
  for (const [key, value] of Object.entries(patch)) {
    const before = stored[key]
    if (value === null) delete out[key]
    else if (SECRET_FIELDS[type].includes(key) && typeof before === "string" && value === mask(before)) out[key] = before
    else if (
      SECRET_MAPS[type].includes(key) &&
      typeof value === "object" &&
      !Array.isArray(value) &&
      typeof before === "object"
    ) {
      out[key] = Object.fromEntries(
        Object.entries(value as Record<string, unknown>).map(([name, v]) => {
          const old = before[name]
          return [name, old !== undefined && v === mask(old) ? old : v]
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

/** A tenant's regex is run on every generation: short, and without the nested quantifiers that backtrack exponentially. */
export const REGEX_MAX_LENGTH = 256

/**
 * Why a filter's regex is refused, or undefined: too long, a quantified group that itself holds a
 * quantifier (`(a+)+`, `(\w*)*`, `(a|b+){2,}`), a backreference, or not compilable.
 */
export const regexProblem = (pattern: string): string | undefined => {
  if (pattern.length > REGEX_MAX_LENGTH) return `is longer than ${REGEX_MAX_LENGTH} characters`
  // Each open group: whether a quantifier occurs inside it.
  const groups: Array<boolean> = []
  let inClass = false
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]
    if (ch === "\\") {
      const next = pattern[i + 1] ?? ""
      if (!inClass && /[1-9k]/.test(next)) return "uses a backreference (not allowed)"
      i++
      continue
    }
    if (inClass) {
      if (ch === "]") inClass = false
      continue
    }
    if (ch === "[") inClass = true
    else if (ch === "(") groups.push(false)
    else if (ch === ")") {
      const quantifiedInside = groups.pop() ?? false
      const next = pattern[i + 1]
      const quantified = next === "*" || next === "+" || next === "?" || next === "{"
      if (quantified && quantifiedInside) return "nests quantifiers (e.g. (a+)+), which can take exponential time"
      if (groups.length > 0 && (quantifiedInside || quantified)) groups[groups.length - 1] = true
    } else if ((ch === "*" || ch === "+" || ch === "{") && groups.length > 0) groups[groups.length - 1] = true
  }
  try {
    new RegExp(pattern)
    return undefined
  } catch (e) {
    return `is not a valid regular expression (${(e as Error).message})`
  }
}

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
  Schema.maxLength(100, { message: () => "at most 100 characters" }),
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

export const CreateDestinationPayload = Schema.Struct({
  name: DestinationName,
  type: DestinationType,
  config: ConfigObject,
  ...settings,
  workspace_id: Schema.optional(Schema.String),
})
export type CreateDestinationPayload = typeof CreateDestinationPayload.Type

/** Every field optional; `config` merges into the stored one (see `mergeConfig`). */
export const UpdateDestinationPayload = Schema.Struct({
  name: Schema.optional(DestinationName),
  type: Schema.optional(DestinationType),
  config: Schema.optional(ConfigObject),
  ...settings,
})
export type UpdateDestinationPayload = typeof UpdateDestinationPayload.Type

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

export const Destination = Schema.Struct({
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
export type Destination = typeof Destination.Type

/** `POST /observability/destinations/{id}/test`: the status class and a short reason, never the receiver's body. */
export const DestinationTestData = Schema.Struct({
  data: Schema.Struct({ ok: Schema.Boolean, status: Schema.Int, message: Schema.String }),
})

/** `POST /observability/destinations/{id}/redeliver`: how many dead deliveries were queued again. */
export const RedeliverData = Schema.Struct({ data: Schema.Struct({ requeued: Schema.Int }) })

export const DestinationData = Schema.Struct({ data: Destination })
export const DestinationList = Schema.Struct({ data: Schema.Array(Destination), total_count: Schema.Int })

export const DestinationIdPath = Schema.Struct({ id: Schema.String })

export const ListDestinationsParams = Schema.Struct({ ...PageParams.fields, workspace_id: Schema.optional(Schema.String) })
