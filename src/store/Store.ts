/**
 * The SqlClient: a SQLite file by default, Postgres when DATABASE_URL is a postgres URL.
 * Migrations run when the layer is built (start-up) and by `gateway migrate`.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { mkdirSync } from "node:fs"
import { dirname } from "node:path"
import { Effect, Layer, Redacted, Runtime } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { BACKSTOP_AUTOCHECKPOINT, startCheckpoints } from "./checkpoints.js"
import { migrations } from "./migrations/index.js"
import { type MainConnection, noMainConnection, sqliteLayer } from "./sqlite-client.js"

const sqlitePragmas = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`PRAGMA busy_timeout = 5000`
  yield* sql`PRAGMA foreign_keys = ON`
  yield* sql`PRAGMA synchronous = NORMAL`
  // The checkpointer Worker copies the log back (src/store/checkpoints.ts); this is its backstop.
  yield* sql`PRAGMA wal_autocheckpoint = ${sql.literal(String(BACKSTOP_AUTOCHECKPOINT))}`
})

/** The engine's client for a DATABASE_URL. */
/** Connections of one process's Postgres pool unless `database.pool_size` says otherwise (each worker of `--workers` has its own). */
export const DEFAULT_PG_POOL_SIZE = 20

export const clientLayer = (databaseUrl: string, poolSize = DEFAULT_PG_POOL_SIZE): Layer.Layer<SqlClient.SqlClient | MainConnection, SqlError.SqlError> => {
  if (isPostgresUrl(databaseUrl)) {
    // The driver is loaded only for Postgres: a SQLite process never loads its modules.
    return Layer.unwrapEffect(
      Effect.promise(() => Promise.all([import("@effect/sql-pg"), import("./pg-types.js")])).pipe(
        Effect.map(([{ PgClient }, { pgTypes }]) =>
          Layer.merge(
            PgClient.layer({
              url: Redacted.make(databaseUrl),
              maxConnections: poolSize,
              // A connection that cannot be made in this time fails (a server that accepts and stalls would
              // otherwise hold the request forever): the request gets 503, a ledger batch goes to the spool.
              connectTimeout: "5 seconds",
              // BIGINT money and its sums as numbers, not strings.
              types: pgTypes,
            }).pipe(Layer.orDie),
            noMainConnection,
          ),
        ),
      ),
    )
  }
  if (databaseUrl !== ":memory:") mkdirSync(dirname(databaseUrl), { recursive: true })
  return sqliteLayer(databaseUrl).pipe(Layer.tap((ctx) => Effect.provide(sqlitePragmas, ctx)))
}

/** The table of applied migrations, made when the database has none yet. */
const migrationsTable = Effect.flatMap(
  SqlClient.SqlClient,
  (sql) => sql`CREATE TABLE IF NOT EXISTS schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`,
)

/** The migrations not yet applied, each in its own transaction. */
const applyPending = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* migrationsTable
  const applied = new Set((yield* sql<{ id: number }>`SELECT id FROM schema_migrations`).map((r) => Number(r.id)))
  // A build rolled back after a newer one migrated: it runs, but says so (refusing would turn a rollback into an outage).
  const known = new Set(migrations.map((m) => m.id))
  const newer = [...applied].filter((id) => !known.has(id)).sort((a, b) => a - b)
  if (newer.length > 0) {
    yield* Effect.logWarning(
      `the database has migrations this build does not know (${newer.join(", ")}): a newer build made them; this one runs on a schema it was not written for`,
    )
  }
  const ran: Array<string> = []
  for (const m of migrations) {
    if (applied.has(m.id)) continue
    yield* sql.withTransaction(
      Effect.zipRight(
        m.up,
        sql`INSERT INTO schema_migrations (id, name, applied_at) VALUES (${m.id}, ${m.name}, ${new Date().toISOString()})`,
      ),
    )
    ran.push(`${m.id}_${m.name}`)
  }
  return ran
})

/** Any fixed number: the advisory lock the processes of one Postgres database migrate under. */
const MIGRATION_LOCK = 7_262_400_100

/**
 * Applies the migrations not yet applied, each in its own transaction, the whole run inside one
 * that holds the database's write lock from its first statement: two processes starting on a
 * fresh database at once (replicas, or `gateway migrate` beside a start) both created the
 * tables, and the second stopped on a duplicate table, column or type; now it waits, then finds
 * nothing to apply. Postgres: an advisory lock. SQLite: a write that changes nothing takes the
 * file's write lock (the busy timeout's wait) before the applied migrations are read.
 */
export const migrate = Effect.flatMap(SqlClient.SqlClient, (sql) =>
  sql.onDialectOrElse({
    pg: () => sql.withTransaction(Effect.zipRight(sql`SELECT pg_advisory_xact_lock(${MIGRATION_LOCK})`, applyPending)),
    orElse: () =>
      Effect.zipRight(migrationsTable, sql.withTransaction(Effect.zipRight(sql`UPDATE schema_migrations SET id = id WHERE 0`, applyPending))),
  }),
)

/**
 * A SQLite file's checkpoints, off this thread (src/store/checkpoints.ts) for as long as the
 * store is open; failures are logged as errors. Built on the client (the file exists, migrated).
 */
const checkpointsOf = (databaseUrl: string): Layer.Layer<never, never, SqlClient.SqlClient> =>
  isPostgresUrl(databaseUrl) || databaseUrl === ":memory:"
    ? Layer.empty
    : Layer.scopedDiscard(
        Effect.acquireRelease(
          Effect.zipRight(
            SqlClient.SqlClient,
            Effect.map(Effect.runtime<never>(), (rt) => startCheckpoints(databaseUrl, (message) => Runtime.runFork(rt)(Effect.logError(message)))),
          ),
          (checkpoints) => Effect.sync(checkpoints.stop),
        ),
      )

/** The store: the client for the configured database, migrated, and a SQLite file's checkpointer. */
export const StoreLive: Layer.Layer<SqlClient.SqlClient | MainConnection, SqlError.SqlError, GatewayConfig> = Layer.unwrapEffect(
  Effect.map(GatewayConfig, (config) =>
    checkpointsOf(config.databaseUrl).pipe(
      Layer.provideMerge(clientLayer(config.databaseUrl, config.pgPoolSize).pipe(Layer.tap((ctx) => Effect.provide(migrate, ctx)))),
    ),
  ),
)
