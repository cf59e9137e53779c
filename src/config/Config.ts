/**
 * Settings from env plus the optional JSON config file, decoded once at start.
 * Every variable is listed in the README's configuration table.
 */
import { Config, ConfigError, Context, Data, Effect, Either, Layer, Option, ParseResult, type Redacted } from "effect"
import demo from "../../config/demo.json" with { type: "json" }
import { describeParseError } from "../domain/validation.js"
import { checkReferences, ConfigFile } from "./file.js"

export interface Settings {
  readonly port: number
  readonly host: string
  /** `postgres://…` selects Postgres; anything else is a SQLite file path (`:memory:` allowed). */
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
  /** While a stream waits this long for its first token, a `: keep-alive` comment is sent. */
  readonly streamKeepAliveMs: number
  readonly logLevel: "debug" | "info" | "warn" | "error" | "none"
  /** `GET /metrics` and the per-request counters behind it. */
  readonly metrics: boolean
  /** On SIGTERM, how long open streams may take to finish before they are cut. */
  readonly shutdownGraceMs: number
}

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

const readCatalog = (path: Option.Option<string>) =>
  Option.match(path, {
    onNone: () => Effect.succeed({ source: "demo config (built in)", catalog: demoCatalog }),
    onSome: (file) =>
      Effect.tryPromise({
        try: () => Bun.file(file).text(),
        catch: () => new ConfigFileError({ message: `${file}: cannot read the config file (GATEWAY_CONFIG)` }),
      }).pipe(
        Effect.flatMap((text) => parseConfigFile(file, text)),
        Effect.map((catalog) => ({ source: file, catalog })),
      ),
  })

const loadSettings = Effect.gen(function* () {
  const port = yield* Config.integer("PORT").pipe(Config.withDefault(8080))
  const host = yield* Config.string("HOST").pipe(Config.withDefault("0.0.0.0"))
  const dataDir = yield* Config.string("GATEWAY_DATA_DIR").pipe(Config.withDefault("./data"))
  const databaseUrl = yield* Config.string("DATABASE_URL").pipe(Config.withDefault(`${dataDir}/gateway.db`))
  const configPath = yield* Config.option(Config.string("GATEWAY_CONFIG"))
  const managementKey = yield* Config.option(Config.redacted("GATEWAY_MANAGEMENT_KEY"))
  const secretKey = yield* Config.option(Config.redacted("GATEWAY_SECRET_KEY"))
  const maxBodyEnv = yield* Config.option(Config.integer("GATEWAY_MAX_BODY_BYTES"))
  const timeoutEnv = yield* Config.option(Config.integer("GATEWAY_REQUEST_TIMEOUT_MS"))
  const keepAliveMs = yield* Config.integer("GATEWAY_STREAM_KEEPALIVE_MS").pipe(Config.withDefault(15_000))
  const logLevel = yield* Config.literal("debug", "info", "warn", "error", "none")("GATEWAY_LOG_LEVEL").pipe(
    Config.withDefault("info" as const),
  )
  const metrics = yield* Config.literal("on", "off")("GATEWAY_METRICS").pipe(Config.withDefault("on" as const))
  const shutdownGraceMs = yield* Config.integer("GATEWAY_SHUTDOWN_GRACE_MS").pipe(Config.withDefault(30_000))
  const { source, catalog } = yield* readCatalog(configPath)
  return {
    port,
    host,
    databaseUrl,
    dataDir,
    configSource: source,
    catalog,
    managementKey,
    secretKey,
    maxBodyBytes: Option.getOrElse(maxBodyEnv, () => catalog.server?.max_body_bytes ?? 10 * 1024 * 1024),
    requestTimeoutMs: Option.getOrElse(timeoutEnv, () => catalog.server?.request_timeout_ms ?? 600_000),
    creditsEnforced: catalog.credits?.enforce ?? false,
    streamKeepAliveMs: keepAliveMs,
    logLevel,
    metrics: metrics === "on",
    shutdownGraceMs,
  } satisfies Settings
}).pipe(
  Effect.mapError((e) =>
    ConfigError.isConfigError(e) ? new ConfigFileError({ message: `environment: ${String(e)}` }) : e,
  ),
)

export const isPostgresUrl = (url: string) => url.startsWith("postgres://") || url.startsWith("postgresql://")

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
  streamKeepAliveMs: 15_000,
  logLevel: "none",
  metrics: true,
  shutdownGraceMs: 30_000,
  ...overrides,
})

