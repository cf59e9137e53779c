/**
 * Settings from env plus the optional JSON config file, decoded once at start.
 * Every variable is listed: the essentials in the README's Configuration table, the rest in
 * docs/reference.md, "Environment variables and limits".
 */
import { statSync } from "node:fs"
import { hostname } from "node:os"
import { Config, ConfigError, Context, Data, Effect, Either, Layer, Option, ParseResult, Redacted } from "effect"
import demo from "../../config/demo.json" with { type: "json" }
import { keyShaped } from "../domain/keys.js"
import { DEFAULT_UPSTREAM_LIMITS } from "../providers/types.js"
import { describeParseError } from "../domain/validation.js"
import type { SearchEngineId } from "../domain/web.js"
import { checkReferences, ConfigFile } from "./file.js"

export interface Settings {
  readonly port: number
  /** The address to bind: 127.0.0.1 unless HOST says otherwise. */
  readonly host: string
  /** `postgres://…` selects Postgres; anything else is a SQLite file path (`:memory:` allowed): `databaseTarget` turns `DATABASE_URL` into one. */
  readonly databaseUrl: string
  readonly dataDir: string
  /** Where the catalog came from, for messages. */
  readonly configSource: string
  readonly catalog: ConfigFile
  readonly managementKey: Option.Option<Redacted.Redacted<string>>
  readonly secretKey: Option.Option<Redacted.Redacted<string>>
  readonly maxBodyBytes: number
  /** Our own deadline for one model request (408 when exceeded). */
  readonly requestTimeoutMs: number
  readonly creditsEnforced: boolean
  /** Input tokens reserved (and at most charged) for one image part, whatever its size. */
  readonly maxTokensPerImage: number
  /** Input tokens reserved (and at most charged) for one file part, whatever its size. */
  readonly maxTokensPerFile: number
  /** While a stream waits this long for its first token (or a server tool runs), a `: keep-alive` comment is sent. */
  readonly streamKeepAliveMs: number
  readonly logLevel: "debug" | "info" | "warn" | "error" | "none"
  /** `GET /metrics` and the per-request counters behind it. */
  readonly metrics: boolean
  /** The bearer token `GET /metrics` requires; undefined: /metrics is refused (docs/operations.md#metrics). */
  readonly metricsToken: Redacted.Redacted<string> | undefined
  /** `cors.allowed_origins`: `*` or origins; the management endpoints answer only the origins listed by name. */
  readonly corsOrigins: ReadonlyArray<string>
  /** `retention`: generation records and stored content older than this are deleted (undefined: kept). */
  readonly retention: RetentionSettings
  /** On SIGTERM, how long open streams may take to finish before they are cut. */
  readonly shutdownGraceMs: number
  /** A stream whose client has read nothing for this long is cut and recorded cancelled. */
  readonly stallTimeoutMs: number
  /**
   * `ledger.durable_answers`: an answer's last byte goes out only once its generation record
   * (and its settlement) is committed, and the ledger writer commits without a window.
   */
  readonly durableAnswers: boolean
  /**
   * This process's name among those sharing the database: at start it releases the holds left
   * under this name by an earlier run. Two processes running at once need different names.
   */
  readonly instanceId: string
  /** `serve --workers`: the loopback port of the supervisor's merged /metrics (GATEWAY_SUPERVISOR_METRICS_PORT); 0, none. */
  readonly supervisorMetricsPort: number
  /** A hold's lease: released by any process once its owner has not renewed it for this long. */
  readonly holdLeaseMs: number
  /** A budget slice holds at most this many worst cases of the request asking for it (0: no slices, a hold per request). */
  readonly budgetSliceRequests: number
  /** An unused slice is given back once no request on its key came for this long. */
  readonly budgetSliceIdleMs: number
  /** The ledger spool's bound in generations: past it, new requests get 503 until it drains (docs/operations.md). */
  readonly spoolMaxGenerations: number
  /** The ledger spool's bound in bytes of its file. */
  readonly spoolMaxBytes: number
  /** A ledger commit that has not ended after this long counts as failed (a stalled connection): its batch is spooled. */
  readonly commitTimeoutMs: number
  /** Seconds of silence after which Bun closes a connection (0: never); lifted while an authenticated request runs. */
  readonly idleTimeoutS: number
  /** The time a request body may take: this plus its length at 64 KB/s (408 and close when exceeded). */
  readonly bodyTimeoutMs: number
  /** Requests in flight at once, overall and per client address (503 beyond). */
  readonly maxInFlight: number
  readonly maxInFlightPerIp: number
  /** The most bytes read of an upstream's JSON or error body, and of one upstream SSE event (502 beyond). */
  readonly maxUpstreamBodyBytes: number
  readonly maxUpstreamEventBytes: number
  /**
   * Kernel buffers fixed instead of autotuned (0: autotuned), so what a client that does not read
   * makes the gateway hold is bounded: the send buffer of client connections, the receive buffer
   * of upstream connections.
   */
  readonly sendBufferBytes: number
  readonly upstreamReceiveBufferBytes: number
  /** The unsent low-water mark of client connections (`TCP_NOTSENT_LOWAT`; 0: none): what the kernel queues for a client that does not read. */
  readonly unsentLowWaterBytes: number
  /** `outbound.allow_private_addresses`: tenant-given URLs may reach private and loopback addresses. */
  readonly allowPrivateAddresses: boolean
  readonly broadcast: BroadcastSettings
  /** `tracing.trust_traceparent`: the gateway's own spans continue an incoming traceparent. */
  readonly trustTraceparent: boolean
  /** `console.enabled` (default true): the web console and its assets under /console/. */
  readonly consoleEnabled: boolean
  /** `search`: the engine behind web_search and the `web` plugin; undefined when not configured. */
  readonly search: SearchSettings | undefined
  /** Connections of this process's Postgres pool (`database.pool_size`, GATEWAY_PG_POOL_SIZE). */
  readonly pgPoolSize: number
  /** Redis for shared state (`redis.url` or REDIS_URL); undefined: each process keeps its own. */
  readonly redis: RedisSettings | undefined
}

export interface RedisSettings {
  readonly url: Redacted.Redacted<string>
  /** The deadline of one call on the request path. */
  readonly timeoutMs: number
}

export const DEFAULT_REDIS_TIMEOUT_MS = 5

export interface RetentionSettings {
  readonly generationsMs: number | undefined
  readonly contentMs: number | undefined
}

const DAY_MS = 86_400_000

const retentionSettings = (file: ConfigFile["retention"]): RetentionSettings => ({
  generationsMs: file?.generations_days === undefined ? undefined : Math.round(file.generations_days * DAY_MS),
  contentMs: file?.content_days === undefined ? undefined : Math.round(file.content_days * DAY_MS),
})

/** The search engine of the config file, its key read from the environment. */
export interface SearchSettings {
  readonly engine: SearchEngineId
  /** The engine's API root; undefined: the vendor's public API. */
  readonly baseUrl: string | undefined
  readonly apiKey: Redacted.Redacted<string> | undefined
  /** USD per search request. */
  readonly pricePerRequest: number
  readonly timeoutMs: number
}

export const DEFAULT_SEARCH_TIMEOUT_MS = 10_000

/** `search` of the config file with its key (`apiKey`: read from `api_key_env` by the caller). */
export const searchSettingsOf = (file: ConfigFile["search"], apiKey: string | undefined): SearchSettings | undefined =>
  file === undefined
    ? undefined
    : {
        engine: file.engine,
        baseUrl: file.base_url?.replace(/\/+$/, ""),
        apiKey: apiKey === undefined || apiKey === "" ? undefined : Redacted.make(apiKey),
        pricePerRequest: file.pricing?.request ?? 0,
        timeoutMs: file.timeout_ms ?? DEFAULT_SEARCH_TIMEOUT_MS,
      }

/** Delivery to observability destinations (`broadcast` in the config file). */
export interface BroadcastSettings {
  readonly batchSize: number
  /** A request to a destination stays under about this many bytes (fewer generations when they carry long content). */
  readonly batchMaxBytes: number
  readonly timeoutMs: number
  readonly maxAttempts: number
  readonly retryBaseMs: number
  readonly maxPendingPerDestination: number
  /** The pending batches' bytes in all (items and sealed content), whatever the destinations. */
  readonly maxPendingBytes: number
  readonly concurrencyPerDestination: number
  readonly retentionMs: number
  /** How often the worker looks for due rows (at most 1 s: a batch waits no longer). */
  readonly pollMs: number
  /**
   * `broadcast.worker_nice`: the delivery Worker's thread priority on Linux, 0 (the process's) to 19
   * (the lowest: delivery takes what requests leave; src/broadcast/delivery-worker.ts).
   */
  readonly workerNice: number
  /**
   * Delivery on the thread that serves requests rather than in the delivery Worker: the test kit
   * (src/testing/), whose clock seam moves retries, and another thread does not share that clock.
   */
  readonly inThread?: boolean
}

export const DEFAULT_BROADCAST: BroadcastSettings = {
  // Generations per request: ~500 spans, as OpenTelemetry's batch span processor sends (512). A
  // send costs ~140 µs of CPU beside its bytes: at 100 a request, ~4 µs per generation for three destinations.
  batchSize: 250,
  // Under the strictest ingest limits documented (~1 MB a request, e.g. New Relic's trace API).
  batchMaxBytes: 1_000_000,
  timeoutMs: 10_000,
  maxAttempts: 8,
  retryBaseMs: 1_000,
  // Through a destination's outage or a burst of load the Worker is behind on: ~17 minutes at
  // 1,000 requests a second (10,000, the earlier default, was ten seconds, and less than one at
  // the load a core serves). Disk is bounded by `maxPendingBytes`.
  maxPendingPerDestination: 1_000_000,
  // 1 GiB of pending items and content, whichever cap comes first.
  maxPendingBytes: 1_073_741_824,
  concurrencyPerDestination: 2,
  retentionMs: 7 * 24 * 3_600_000,
  pollMs: 250,
  workerNice: 19,
}

/**
 * Tests' broadcast settings: the Worker at the process's priority. Test files run beside other test
 * processes and a browser, all at nice 0; at nice 19 the Worker got ~1.5 % of a core and a test
 * waiting 20 s for a resend failed (three busy loops beside worker.test.ts: failed at 19, passed in
 * 7 s at 0). The tests of the priority itself give 19.
 */
export const TEST_BROADCAST: BroadcastSettings = { ...DEFAULT_BROADCAST, workerNice: 0 }

const broadcastSettings = (file: ConfigFile["broadcast"]): BroadcastSettings => ({
  batchSize: file?.batch_size ?? DEFAULT_BROADCAST.batchSize,
  batchMaxBytes: file?.batch_max_bytes ?? DEFAULT_BROADCAST.batchMaxBytes,
  timeoutMs: file?.timeout_ms ?? DEFAULT_BROADCAST.timeoutMs,
  maxAttempts: file?.max_attempts ?? DEFAULT_BROADCAST.maxAttempts,
  retryBaseMs: file?.retry_base_ms ?? DEFAULT_BROADCAST.retryBaseMs,
  maxPendingPerDestination: file?.max_pending_per_destination ?? DEFAULT_BROADCAST.maxPendingPerDestination,
  maxPendingBytes: file?.max_pending_bytes ?? DEFAULT_BROADCAST.maxPendingBytes,
  concurrencyPerDestination: file?.concurrency_per_destination ?? DEFAULT_BROADCAST.concurrencyPerDestination,
  retentionMs: file?.retention_hours === undefined ? DEFAULT_BROADCAST.retentionMs : file.retention_hours * 3_600_000,
  pollMs: DEFAULT_BROADCAST.pollMs,
  workerNice: file?.worker_nice ?? DEFAULT_BROADCAST.workerNice,
})

/** A high-detail image is at most ~1,600 tokens at the major providers (tiles or pixels). */
export const DEFAULT_MAX_TOKENS_PER_IMAGE = 2_000
/** A file part (e.g. a PDF of ~10-20 pages, text and page images); beyond it the operator pays. */
export const DEFAULT_MAX_TOKENS_PER_FILE = 32_000

/** The connection and upstream limits' defaults (docs/reference.md, "Environment variables and limits"). */
export const DEFAULT_LIMITS = {
  idleTimeoutS: 30,
  bodyTimeoutMs: 10_000,
  maxInFlight: 10_000,
  maxInFlightPerIp: 1_000,
  maxUpstreamBodyBytes: DEFAULT_UPSTREAM_LIMITS.bodyBytes,
  maxUpstreamEventBytes: DEFAULT_UPSTREAM_LIMITS.eventBytes,
  sendBufferBytes: 32 * 1024,
  upstreamReceiveBufferBytes: DEFAULT_UPSTREAM_LIMITS.receiveBufferBytes ?? 0,
  unsentLowWaterBytes: 16 * 1024,
} as const

/** Budget leases (src/services/budget-leases.ts): a slice of up to 1,000 worst cases, given back after 1 s unused. */
export const DEFAULT_BUDGET_SLICE = { requests: 1_000, idleMs: 1_000 } as const

/** Any origin for the data plane and the read endpoints (no credentials are ever allowed). */
export const DEFAULT_CORS_ORIGINS: ReadonlyArray<string> = ["*"]

/** The ledger spool's bound (100,000 generations or 1 GiB of file) and the commit timeout (docs/operations.md). */
export const DEFAULT_SPOOL = { maxGenerations: 100_000, maxBytes: 1024 ** 3, commitTimeoutMs: 10_000 } as const

export class ConfigFileError extends Data.TaggedError("ConfigFileError")<{ readonly message: string }> {}

export class GatewayConfig extends Context.Tag("GatewayConfig")<GatewayConfig, Settings>() {
  /** Settings from env and the config file. */
  static readonly fromEnv = Layer.effect(
    GatewayConfig,
    Effect.suspend(() => loadSettings),
  )
  /** Fixed settings (tests). */
  static readonly layer = (settings: Settings) => Layer.succeed(GatewayConfig, settings)
}

// A misspelt key is refused like any other mistake: ignored, it started as if the setting were absent.
const decodeFile = ParseResult.decodeUnknownEither(ConfigFile, { errors: "first", onExcessProperty: "error" })

/** Decodes and checks a config file's JSON text; the error names the source, the path and the rule. */
export const parseConfigFile = (source: string, text: string): Either.Either<ConfigFile, ConfigFileError> => {
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch (e) {
    return Either.left(new ConfigFileError({ message: `${source}: not valid JSON (${(e as Error).message})` }))
  }
  const decoded = decodeFile(json)
  if (Either.isLeft(decoded)) {
    const detail = describeParseError(new ParseResult.ParseError({ issue: decoded.left }))
    return Either.left(new ConfigFileError({ message: `${source}: ${detail}` }))
  }
  const broken = checkReferences(decoded.right)
  return broken === undefined
    ? Either.right(decoded.right)
    : Either.left(new ConfigFileError({ message: `${source}: ${broken}` }))
}

export const demoCatalog: ConfigFile = Either.getOrThrow(parseConfigFile("config/demo.json", JSON.stringify(demo)))

/** The largest config file read: 20,000 models are ~3 MB. */
const MAX_CONFIG_BYTES = 64 * 1024 * 1024

/** Why GATEWAY_CONFIG's path cannot be read as a config file before reading it, or undefined: a FIFO hung the start, /dev/zero filled memory. */
const configFileProblem = (file: string): string | undefined => {
  try {
    const stat = statSync(file)
    if (!stat.isFile()) return `${file}: is not a regular file (GATEWAY_CONFIG)`
    if (stat.size > MAX_CONFIG_BYTES) return `${file}: is ${stat.size} bytes, more than a config file may be (${MAX_CONFIG_BYTES}) (GATEWAY_CONFIG)`
    return undefined
  } catch {
    return undefined // read below, which says it cannot
  }
}

const readCatalog = (path: Option.Option<string>) =>
  Option.match(path, {
    onNone: () => Effect.succeed({ source: "demo config (built in)", catalog: demoCatalog }),
    onSome: (file) =>
      Effect.suspend(() => {
        const problem = configFileProblem(file)
        return problem === undefined ? Effect.void : Effect.fail(new ConfigFileError({ message: problem }))
      }).pipe(
        Effect.zipRight(
          Effect.tryPromise({
            try: () => Bun.file(file).text(),
            catch: () => new ConfigFileError({ message: `${file}: cannot read the config file (GATEWAY_CONFIG)` }),
          }),
        ),
        Effect.flatMap((text) => parseConfigFile(file, text)),
        Effect.map((catalog) => ({ source: file, catalog })),
      ),
  })

/** An integer variable in [min, max]; set but empty is refused (`PORT=` from an EnvironmentFile line read as 0, a random port). */
const integerIn = (name: string, min: number, max = Number.MAX_SAFE_INTEGER) =>
  Config.string(name).pipe(
    Config.mapOrFail((text) => {
      const trimmed = text.trim()
      const n = /^-?[0-9]+$/.test(trimmed) ? Number(trimmed) : Number.NaN
      return Number.isSafeInteger(n) && n >= min && n <= max
        ? Either.right(n)
        : Either.left(ConfigError.InvalidData([], `must be an integer from ${min} to ${max}, not ${trimmed === "" ? "empty" : JSON.stringify(trimmed.slice(0, 40))}`))
    }),
  )

const serverRules = ConfigFile.fields.server.from
type ServerKey = keyof typeof serverRules.fields

/**
 * A variable that sets a `server.…` key of the config file, decoded by that key's own rule (a
 * value the file refuses is refused from the environment too): undefined when it is not set.
 */
const serverVariable = (name: string, key: ServerKey) =>
  Effect.flatMap(Config.option(Config.string(name)), (text) => {
    if (Option.isNone(text)) return Effect.succeed(undefined)
    const raw = text.value.trim()
    const value = /^-?\d+(\.\d+)?$/.test(raw) ? Number(raw) : raw
    return Either.match(ParseResult.decodeUnknownEither(serverRules.pick(key))({ [key]: value }), {
      onLeft: (issue) => {
        const rule = describeParseError(new ParseResult.ParseError({ issue })).replace(/^[\w.[\]]+: /, "")
        return Effect.fail(new ConfigFileError({ message: `environment: ${name}: ${rule} (the rule of server.${key}; got "${text.value}")` }))
      },
      onRight: (decoded) => Effect.succeed(decoded[key] as number | undefined),
    })
  })

/** A scheme before the first colon (`mysql://…`, `file:…`); a plain path or `:memory:` has none. */
const SCHEME = /^([a-z][a-z0-9+.-]*):/i

/**
 * `DATABASE_URL` as the store opens it: Postgres URLs as they are, a SQLite file as its path
 * (`file:PATH` and `sqlite:PATH`, with `//` after the colon dropped: `sqlite:///var/gw.db` is
 * `/var/gw.db`). Another scheme is refused: taken as a path, `mysql://…` became a SQLite file.
 */
export const databaseTarget = (url: string): Either.Either<string, string> => {
  const scheme = SCHEME.exec(url)?.[1]?.toLowerCase()
  if (scheme === undefined || scheme === "postgres" || scheme === "postgresql") return Either.right(url)
  if (scheme === "file" || scheme === "sqlite") {
    const path = url.slice(scheme.length + 1).replace(/^\/\//, "")
    return path === "" ? Either.left(`DATABASE_URL: ${scheme}: needs a file path after it (e.g. ${scheme}:./data/gateway.db)`) : Either.right(path)
  }
  return Either.left(
    `DATABASE_URL: unsupported scheme "${scheme}:"; use a SQLite file path (or file:PATH, sqlite:PATH, :memory:) or postgres:// / postgresql://`,
  )
}

/** One line naming the variable and the rule, from Effect's config error (`(Invalid data at PORT: "…")` before). */
const describeConfigError = (e: ConfigError.ConfigError): string => {
  switch (e._op) {
    case "And":
    case "Or":
      return describeConfigError(e.left)
    case "InvalidData":
    case "MissingData":
    case "SourceUnavailable":
    case "Unsupported":
      // A validated redacted variable's error has no path: its message names the variable itself.
      return e.path.length === 0 ? e.message : `${e.path.join(".")}: ${e.message}`
  }
}

const loadSettings = Effect.gen(function* () {
  const port = yield* integerIn("PORT", 0, 65535).pipe(Config.withDefault(8080))
  // Loopback unless told otherwise: a first `npm start` is not reachable from the network.
  const host = yield* Config.nonEmptyString("HOST").pipe(Config.withDefault("127.0.0.1"))
  const dataDir = yield* Config.string("GATEWAY_DATA_DIR").pipe(Config.withDefault("./data"))
  const databaseUrl = yield* Effect.flatMap(Config.string("DATABASE_URL").pipe(Config.withDefault(`${dataDir}/gateway.db`)), (url) =>
    Either.mapLeft(databaseTarget(url), (message) => new ConfigFileError({ message: `environment: ${message}` })),
  )
  const configPath = yield* Config.option(Config.string("GATEWAY_CONFIG"))
  const managementKey = yield* Config.option(
    Config.redacted("GATEWAY_MANAGEMENT_KEY").pipe(
      Config.validate({
        message: "GATEWAY_MANAGEMENT_KEY: must be a generated key (sk-gw-v1- and 64 hex digits) or 1-256 visible ASCII characters not starting with sk-gw-v1-",
        validation: (secret) => keyShaped(Redacted.value(secret)),
      }),
    ),
  )
  const secretKey = yield* Config.option(Config.redacted("GATEWAY_SECRET_KEY"))
  const maxBodyEnv = yield* serverVariable("GATEWAY_MAX_BODY_BYTES", "max_body_bytes")
  const timeoutEnv = yield* serverVariable("GATEWAY_REQUEST_TIMEOUT_MS", "request_timeout_ms")
  const stallEnv = yield* serverVariable("GATEWAY_STALL_TIMEOUT_MS", "stall_timeout_ms")
  const keepAliveMs = yield* integerIn("GATEWAY_STREAM_KEEPALIVE_MS", 1).pipe(Config.withDefault(15_000))
  const logLevel = yield* Config.literal("debug", "info", "warn", "error", "none")("GATEWAY_LOG_LEVEL").pipe(
    Config.withDefault("info" as const),
  )
  const metrics = yield* Config.literal("on", "off")("GATEWAY_METRICS").pipe(Config.withDefault("on" as const))
  const metricsTokenEnv = yield* Config.option(
    Config.redacted("GATEWAY_METRICS_TOKEN").pipe(
      Config.validate({ message: "GATEWAY_METRICS_TOKEN: must be at least 16 characters", validation: (t) => Redacted.value(t).length >= 16 }),
    ),
  )
  const shutdownGraceMs = yield* integerIn("GATEWAY_SHUTDOWN_GRACE_MS", 0).pipe(Config.withDefault(30_000))
  const durableEnv = yield* Config.option(Config.boolean("GATEWAY_DURABLE_ANSWERS"))
  const instanceEnv = yield* Config.option(Config.nonEmptyString("GATEWAY_INSTANCE_ID"))
  const supervisorMetricsPort = yield* integerIn("GATEWAY_SUPERVISOR_METRICS_PORT", 0, 65535).pipe(Config.withDefault(0))
  // Bun's idleTimeout is at most 255 seconds.
  const idleEnv = yield* serverVariable("GATEWAY_IDLE_TIMEOUT_S", "idle_timeout_s")
  const bodyTimeoutEnv = yield* serverVariable("GATEWAY_BODY_TIMEOUT_MS", "body_timeout_ms")
  const maxInFlightEnv = yield* serverVariable("GATEWAY_MAX_IN_FLIGHT", "max_in_flight")
  const maxInFlightPerIpEnv = yield* serverVariable("GATEWAY_MAX_IN_FLIGHT_PER_IP", "max_in_flight_per_ip")
  const poolEnv = yield* Config.option(integerIn("GATEWAY_PG_POOL_SIZE", 1, 1000))
  // Read where the transport is made (providers/http1.ts, `defaultTransport`); checked here, so a typo is not the default silently.
  yield* Config.option(Config.literal("http1", "fetch")("GATEWAY_UPSTREAM_CLIENT"))
  const redisEnv = yield* Config.option(
    Config.redacted("REDIS_URL").pipe(
      Config.validate({
        message: "REDIS_URL: must be a redis:// or rediss:// URL",
        validation: (url) => /^(redis|rediss|valkey|valkeys):\/\/\S+$/.test(Redacted.value(url)),
      }),
    ),
  )
  const { source, catalog } = yield* readCatalog(configPath)
  const redisUrl = Option.orElse(redisEnv, () => Option.fromNullable(catalog.redis?.url).pipe(Option.map(Redacted.make)))
  // The engine's key must be set when the file names its variable: a gateway whose searches would all fail does not start.
  const searchKeyEnv = catalog.search?.api_key_env
  const searchKey =
    searchKeyEnv === undefined
      ? undefined
      : Redacted.value(
          yield* Config.redacted(searchKeyEnv).pipe(
            Effect.mapError(
              () => new ConfigFileError({ message: `environment: ${searchKeyEnv}: is not set (search.api_key_env names it: the search engine's key)` }),
            ),
          ),
        )
  return {
    port,
    host,
    databaseUrl,
    dataDir,
    configSource: source,
    catalog,
    managementKey,
    secretKey,
    maxBodyBytes: maxBodyEnv ?? catalog.server?.max_body_bytes ?? 10 * 1024 * 1024,
    requestTimeoutMs: timeoutEnv ?? catalog.server?.request_timeout_ms ?? 600_000,
    creditsEnforced: catalog.credits?.enforce ?? false,
    maxTokensPerImage: catalog.money?.max_tokens_per_image ?? DEFAULT_MAX_TOKENS_PER_IMAGE,
    maxTokensPerFile: catalog.money?.max_tokens_per_file ?? DEFAULT_MAX_TOKENS_PER_FILE,
    streamKeepAliveMs: keepAliveMs,
    logLevel,
    metrics: metrics === "on",
    metricsToken: Option.getOrUndefined(metricsTokenEnv) ?? (catalog.metrics?.token === undefined ? undefined : Redacted.make(catalog.metrics.token)),
    corsOrigins: catalog.cors?.allowed_origins ?? DEFAULT_CORS_ORIGINS,
    retention: retentionSettings(catalog.retention),
    shutdownGraceMs,
    stallTimeoutMs: stallEnv ?? catalog.server?.stall_timeout_ms ?? 60_000,
    durableAnswers: Option.getOrElse(durableEnv, () => catalog.ledger?.durable_answers ?? false),
    instanceId: Option.getOrElse(instanceEnv, () => catalog.instance_id ?? hostname()),
    supervisorMetricsPort,
    holdLeaseMs: catalog.ledger?.hold_lease_ms ?? 30_000,
    budgetSliceRequests: catalog.ledger?.budget_slice_requests ?? DEFAULT_BUDGET_SLICE.requests,
    budgetSliceIdleMs: catalog.ledger?.budget_slice_idle_ms ?? DEFAULT_BUDGET_SLICE.idleMs,
    spoolMaxGenerations: catalog.ledger?.spool_max_generations ?? DEFAULT_SPOOL.maxGenerations,
    spoolMaxBytes: catalog.ledger?.spool_max_bytes ?? DEFAULT_SPOOL.maxBytes,
    commitTimeoutMs: catalog.ledger?.commit_timeout_ms ?? DEFAULT_SPOOL.commitTimeoutMs,
    idleTimeoutS: idleEnv ?? catalog.server?.idle_timeout_s ?? DEFAULT_LIMITS.idleTimeoutS,
    bodyTimeoutMs: bodyTimeoutEnv ?? catalog.server?.body_timeout_ms ?? DEFAULT_LIMITS.bodyTimeoutMs,
    maxInFlight: maxInFlightEnv ?? catalog.server?.max_in_flight ?? DEFAULT_LIMITS.maxInFlight,
    maxInFlightPerIp: maxInFlightPerIpEnv ?? catalog.server?.max_in_flight_per_ip ?? DEFAULT_LIMITS.maxInFlightPerIp,
    maxUpstreamBodyBytes: catalog.server?.max_upstream_body_bytes ?? DEFAULT_LIMITS.maxUpstreamBodyBytes,
    maxUpstreamEventBytes: catalog.server?.max_upstream_event_bytes ?? DEFAULT_LIMITS.maxUpstreamEventBytes,
    sendBufferBytes: catalog.server?.send_buffer_bytes ?? DEFAULT_LIMITS.sendBufferBytes,
    upstreamReceiveBufferBytes: catalog.server?.upstream_receive_buffer_bytes ?? DEFAULT_LIMITS.upstreamReceiveBufferBytes,
    unsentLowWaterBytes: catalog.server?.unsent_low_water_bytes ?? DEFAULT_LIMITS.unsentLowWaterBytes,
    allowPrivateAddresses: catalog.outbound?.allow_private_addresses ?? false,
    broadcast: broadcastSettings(catalog.broadcast),
    trustTraceparent: catalog.tracing?.trust_traceparent ?? false,
    consoleEnabled: catalog.console?.enabled ?? true,
    search: searchSettingsOf(catalog.search, searchKey),
    pgPoolSize: Option.getOrElse(poolEnv, () => catalog.database?.pool_size ?? 20),
    redis: Option.match(redisUrl, {
      onNone: () => undefined,
      onSome: (url) => ({ url, timeoutMs: catalog.redis?.timeout_ms ?? DEFAULT_REDIS_TIMEOUT_MS }),
    }),
  } satisfies Settings
}).pipe(
  Effect.mapError((e) =>
    ConfigError.isConfigError(e) ? new ConfigFileError({ message: `environment: ${describeConfigError(e)}` }) : e,
  ),
)

export const isPostgresUrl = (url: string) => url.startsWith("postgres://") || url.startsWith("postgresql://")

const testSearchSettings = (catalog: ConfigFile): SearchSettings | undefined => {
  const env = catalog.search?.api_key_env
  return searchSettingsOf(catalog.search, env === undefined ? undefined : process.env[env])
}

/** Settings for tests and tools: the demo catalog, an in-memory store, nothing from env. */
export const testSettings = (overrides: Partial<Settings> = {}): Settings => ({
  port: 0,
  host: "127.0.0.1",
  databaseUrl: ":memory:",
  dataDir: "./data",
  configSource: "test",
  catalog: demoCatalog,
  managementKey: Option.none(),
  secretKey: Option.none(),
  maxBodyBytes: 10 * 1024 * 1024,
  requestTimeoutMs: 600_000,
  creditsEnforced: false,
  maxTokensPerImage: DEFAULT_MAX_TOKENS_PER_IMAGE,
  maxTokensPerFile: DEFAULT_MAX_TOKENS_PER_FILE,
  streamKeepAliveMs: 15_000,
  logLevel: "none",
  metrics: true,
  metricsToken: undefined,
  corsOrigins: DEFAULT_CORS_ORIGINS,
  retention: { generationsMs: undefined, contentMs: undefined },
  shutdownGraceMs: 30_000,
  stallTimeoutMs: 60_000,
  durableAnswers: false,
  // A name of its own per test gateway: one starting never releases another's holds.
  instanceId: `test-${crypto.randomUUID().slice(0, 8)}`,
  supervisorMetricsPort: 0,
  holdLeaseMs: 30_000,
  budgetSliceRequests: DEFAULT_BUDGET_SLICE.requests,
  budgetSliceIdleMs: DEFAULT_BUDGET_SLICE.idleMs,
  spoolMaxGenerations: DEFAULT_SPOOL.maxGenerations,
  spoolMaxBytes: DEFAULT_SPOOL.maxBytes,
  commitTimeoutMs: DEFAULT_SPOOL.commitTimeoutMs,
  ...DEFAULT_LIMITS,
  allowPrivateAddresses: false,
  broadcast: TEST_BROADCAST,
  trustTraceparent: false,
  consoleEnabled: true,
  // From the catalog given (its key from the environment, unset allowed), unless given itself.
  search: testSearchSettings(overrides.catalog ?? demoCatalog),
  redis: undefined,
  // Test files run side by side against one Postgres server (max_connections 100 by default):
  // pools of 20 per gateway, several gateways a file, ran it out of connections ("too many clients").
  pgPoolSize: 5,
  ...overrides,
})

