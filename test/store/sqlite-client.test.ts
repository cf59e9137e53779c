/**
 * The SQLite client's `MainConnection` and `besideMain`: a write on a connection of the gateway's
 * own runs at once (no Effect transaction, no permit) when no transaction is open on the main
 * connection, and waits for the open one to end otherwise, so a read-then-write transaction there
 * never meets SQLITE_BUSY_SNAPSHOT.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Database } from "bun:sqlite"
import { Deferred, Effect, Exit, Fiber, ManagedRuntime, Tracer } from "effect"
import { besideMain, MainConnection, sqliteLayer } from "../../src/store/sqlite-client.js"
import { sqliteFileDatabase } from "../support/db.js"

const db = sqliteFileDatabase("gw-sqlite-client")
const rt = ManagedRuntime.make(sqliteLayer(db.url))
// A second connection to the same file, as the ledger writer and the spend statements have.
let other: Database | undefined
afterAll(async () => {
  other?.close()
  await rt.dispose()
  await db.drop()
})

/** Names of the spans an effect makes (an Effect transaction makes "sql.transaction"). */
const spansOf = <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient | MainConnection>) =>
  Effect.flatMap(Effect.tracer, (base) => {
    const names: Array<string> = []
    const tracer = Tracer.make({
      span: (name, parent, context, links, startTime, kind, options) => {
        names.push(name)
        return base.span(name, parent, context, links, startTime, kind, options)
      },
      context: (f, fiber) => base.context(f, fiber),
    })
    return Effect.map(Effect.withTracer(effect, tracer), (value) => ({ value, names }))
  })

const setup = Effect.gen(function* () {
  const sql = yield* SqlClient.SqlClient
  yield* sql`CREATE TABLE IF NOT EXISTS t (id INTEGER PRIMARY KEY, v TEXT NOT NULL)`
  other ??= new Database(db.url, { readwrite: true, strict: true })
})

const insertOther = (v: string) => () => other!.run("INSERT INTO t (v) VALUES (?)", [v])

describe("MainConnection.idle", () => {
  test("is false only while a transaction is open on the main connection", async () => {
    const seen = await rt.runPromise(
      Effect.gen(function* () {
        yield* setup
        const sql = yield* SqlClient.SqlClient
        const main = yield* MainConnection
        const seen: Array<boolean> = [main.idle()]
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`SELECT COUNT(*) AS n FROM t`
            seen.push(main.idle())
          }),
        )
        seen.push(main.idle())
        const failed = yield* Effect.exit(
          sql.withTransaction(Effect.zipRight(sql`SELECT 1`, Effect.sync(() => seen.push(main.idle())).pipe(Effect.zipRight(Effect.fail("no"))))),
        )
        seen.push(Exit.isFailure(failed), main.idle())
        return seen
      }),
    )
    // before, inside, after commit, inside the failing one, it failed, after its rollback
    expect(seen).toEqual([true, false, true, false, true, true])
  })
})

describe("besideMain", () => {
  test("with the main connection idle, the write runs at once, without an Effect transaction", async () => {
    const { value, names } = await rt.runPromise(
      spansOf(
        Effect.gen(function* () {
          yield* setup
          const beside = besideMain(yield* SqlClient.SqlClient, yield* MainConnection)
          return yield* beside(insertOther("idle"))
        }),
      ),
    )
    expect(value.changes).toBe(1)
    expect(names).not.toContain("sql.transaction")
  })

  test("with a read-then-write transaction open, the write waits for it, and both commit", async () => {
    const { value, names } = await rt.runPromise(
      spansOf(
        Effect.gen(function* () {
          yield* setup
          const sql = yield* SqlClient.SqlClient
          const beside = besideMain(sql, yield* MainConnection)
          const order: Array<string> = []
          const hasRead = yield* Deferred.make<void>()
          const release = yield* Deferred.make<void>()
          const open = yield* Effect.fork(
            sql.withTransaction(
              Effect.gen(function* () {
                yield* sql`SELECT COUNT(*) AS n FROM t`
                yield* Deferred.succeed(hasRead, undefined)
                yield* Deferred.await(release)
                // Fails with SQLITE_BUSY_SNAPSHOT if the other connection committed after the read.
                yield* sql`INSERT INTO t (v) VALUES ('main')`
                order.push("main committing")
              }),
            ),
          )
          yield* Deferred.await(hasRead)
          const write = yield* Effect.fork(
            beside(() => {
              order.push("beside")
              return insertOther("beside")()
            }),
          )
          yield* Effect.sleep(20)
          const before = [...order]
          yield* Deferred.succeed(release, undefined)
          const mainExit = yield* Effect.exit(Fiber.join(open))
          yield* Fiber.join(write)
          const rows = yield* sql<{ v: string }>`SELECT v FROM t WHERE v IN ('main', 'beside') ORDER BY id`
          return { before, order, mainOk: Exit.isSuccess(mainExit), rows: rows.map((r) => r.v) }
        }),
      ),
    )
    expect(value.before).toEqual([])
    expect(value.order).toEqual(["main committing", "beside"])
    expect(value.mainOk).toBe(true)
    expect(value.rows).toEqual(["main", "beside"])
    expect(names.filter((n) => n === "sql.transaction").length).toBe(2)
  })
})
