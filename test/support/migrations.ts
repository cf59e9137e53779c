/**
 * For the tests of a migration: a database of the engine under test (db.ts) that a test brings to
 * the schema as it was before the migration, fills as the older code did, then migrates.
 */
import { afterAll } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect, ManagedRuntime } from "effect"
import { migrations } from "../../src/store/migrations/index.js"
import { clientLayer } from "../../src/store/Store.js"
import { freshDatabase, type TestDatabase } from "./db.js"

/** Runs effects on one fresh database for the test file, or the enclosing `describe` (made at the first run, dropped after). */
export const useDatabase = () => {
  let db: TestDatabase | undefined
  let rt: ManagedRuntime.ManagedRuntime<SqlClient.SqlClient, unknown> | undefined
  afterAll(async () => {
    await rt?.dispose()
    await db?.drop()
  }, 30_000)
  return async <A, E>(effect: Effect.Effect<A, E, SqlClient.SqlClient>): Promise<A> => {
    if (rt === undefined) {
      db = await freshDatabase()
      rt = ManagedRuntime.make(clientLayer(db.url))
    }
    return rt.runPromise(effect)
  }
}

/** The schema a gateway left before migration `id` (the migrations below it applied and recorded); the client, to fill it as the older code did. */
export const schemaBefore = (id: number) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    yield* sql`CREATE TABLE schema_migrations (id INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)`
    for (const m of migrations.filter((m) => m.id < id)) {
      yield* m.up
      yield* sql`INSERT INTO schema_migrations (id, name, applied_at) VALUES (${m.id}, ${m.name}, '2026-01-01T00:00:00Z')`
    }
    return sql
  })
