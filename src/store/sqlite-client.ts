/**
 * The SqlClient for a SQLite file (@effect/sql-sqlite-bun: one connection, WAL, one transaction
 * at a time behind a permit), with its transactions counted, so that the gateway can see what
 * that permit hides: whether a transaction is open on the main connection (`MainConnection`).
 *
 * Why it matters: the ledger writer and the spend statements run on connections of their own
 * (prepared statements, src/store/ledger.ts and spend-sqlite.ts). A commit there between a read
 * and a write of a deferred transaction on the main connection makes that write fail with
 * SQLITE_BUSY_SNAPSHOT, so those commits used to go through the main connection's permit, an
 * Effect transaction (BEGIN and COMMIT of nothing) each. When no transaction is open or waiting
 * for the permit there is no snapshot to invalidate, and bun:sqlite is synchronous: the commit
 * can run at once. Measured (bench/scratch A/B of the binary, alternating order, 6 rounds): JSON
 * at c=32 138.6 → 127.6 µs of CPU per request.
 */
import { Database } from "bun:sqlite"
import * as Reactivity from "@effect/experimental/Reactivity"
import { SqlClient, type SqlError } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-bun"
import { Context, Effect, Layer } from "effect"
import { enterMain, type Gate, leaveMain, mainOpen, makeGate, writerOut } from "./sqlite-gate.js"

/** The main connection's state, for writers on other connections of the same file. */
export class MainConnection extends Context.Tag("MainConnection")<
  MainConnection,
  {
    /** No transaction is open on the main connection, nor waiting for its permit. */
    readonly idle: () => boolean
    /** A SQLite file's: the same count in shared memory, for a writer on another thread (src/store/sqlite-gate.ts). */
    readonly gate?: Gate
  }
>() {}

/** For an engine without a separate main connection to guard (Postgres): never idle, so writers take the permit path. */
export const noMainConnection = Layer.succeed(MainConnection, { idle: () => false })

/** How long a start waits for another process making the same new file a WAL database. */
const WAL_WAIT_MS = 5_000

/**
 * The file made a WAL database, waiting for another process doing the same. The client's own
 * `journal_mode = WAL` runs before any busy timeout can be set, and the switch from a new file's
 * rollback journal takes an exclusive lock that SQLite refuses at once rather than wait for (a
 * shared lock held cannot wait for another: deadlock): two processes starting on a new file at
 * once had one of them stop on "database is locked". It is tried again, briefly, at start only.
 */
const walWaiting = (filename: string): void => {
  if (filename === ":memory:") return
  const until = Date.now() + WAL_WAIT_MS
  for (;;) {
    const db = new Database(filename, { create: true })
    try {
      db.run("PRAGMA busy_timeout = 5000")
      db.run("PRAGMA journal_mode = WAL")
      return
    } catch (e) {
      if (!(e instanceof Error && e.message.includes("database is locked")) || Date.now() > until) throw e
    } finally {
      db.close()
    }
    Bun.sleepSync(10)
  }
}

const counted = (filename: string) =>
  Effect.gen(function* () {
    walWaiting(filename)
    const client = yield* SqliteClient.make({ filename })
    // The count of open transactions, shared with the delivery Worker's writes (an atomic add when none waits).
    const gate = makeGate()
    const leave = Effect.sync(() => leaveMain(gate))
    const withTransaction: SqlClient.SqlClient["withTransaction"] = (effect) =>
      Effect.suspend(() => {
        const entered = enterMain(gate)
        const inside = Effect.ensuring(client.withTransaction(effect), leave)
        if (entered === true) return inside
        // Counted once the wait ends: uninterruptible until `leave` is sure to run.
        return Effect.uninterruptibleMask((restore) =>
          Effect.zipRight(Effect.promise(() => entered), Effect.ensuring(restore(client.withTransaction(effect)), leave)),
        )
      })
    // The client is also the `sql` template tag (a function): a Proxy keeps it callable and
    // every other member as it is.
    const sql = new Proxy(client, {
      get: (target, key, receiver) => (key === "withTransaction" ? withTransaction : Reflect.get(target, key, receiver)),
    })
    return Context.make(SqliteClient.SqliteClient, sql).pipe(
      Context.add(SqlClient.SqlClient, sql),
      Context.add(MainConnection, { idle: () => mainOpen(gate) === 0, gate }),
    )
  })

/** The client and the main connection's state for a SQLite file (or ":memory:"). */
export const sqliteLayer = (filename: string): Layer.Layer<SqlClient.SqlClient | MainConnection> =>
  Layer.scopedContext(counted(filename)).pipe(Layer.provide(Reactivity.layer))

/**
 * Runs `write`, a transaction on a connection of the gateway's own, where no transaction of the
 * main connection can be between a read and a write: at once when the main connection is idle,
 * else inside its transaction permit (after the open transaction ends).
 */
export const besideMain =
  (sql: SqlClient.SqlClient, main: Context.Tag.Service<MainConnection>) =>
  <A>(write: () => A): Effect.Effect<A, SqlError.SqlError> =>
    Effect.suspend(() => {
      const now = Effect.suspend(() => (main.idle() ? Effect.sync(write) : sql.withTransaction(Effect.sync(write))))
      // The delivery Worker writing (src/store/sqlite-gate.ts): after it, not a busy try and a pause.
      const out = main.gate === undefined ? undefined : writerOut(main.gate)
      return out === undefined ? now : Effect.zipRight(Effect.promise(() => out), now)
    })
