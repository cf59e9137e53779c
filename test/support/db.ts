/**
 * A fresh database per test file: a SQLite file in the temp directory by default (a file, as the
 * gateway runs: the ledger writer has a connection of its own); a new Postgres database when
 * GATEWAY_TEST_PG_URL is set (e.g. postgres://postgres@127.0.0.1:5432/postgres). Dropped after.
 */
import { SQL } from "bun"
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const pgBaseUrl = process.env.GATEWAY_TEST_PG_URL || undefined
export const engine: "postgres" | "sqlite" = pgBaseUrl ? "postgres" : "sqlite"

export interface TestDatabase {
  readonly url: string
  readonly drop: () => Promise<void>
}

const withDatabase = (base: string, name: string) => {
  const u = new URL(base)
  u.pathname = `/${name}`
  return u.toString()
}

/** A new SQLite file in the temp directory; dropping it removes its WAL and shared-memory files too. */
export const sqliteFileDatabase = (prefix = "gw-test"): TestDatabase => {
  const file = join(tmpdir(), `${prefix}-${crypto.randomUUID()}.db`)
  return {
    url: file,
    drop: async () => {
      for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
    },
  }
}

/** The test file that asked, as a database name's part: a database left open in pg_stat_activity names its file. */
const callerFile = (): string => {
  for (const line of (new Error().stack ?? "").split("\n")) {
    const file = /\/test\/(?!support\/)([\w/.-]+?)\.test\.ts/.exec(line)?.[1]
    if (file !== undefined) return file.replace(/[^a-z0-9]+/gi, "_").toLowerCase().slice(-36)
  }
  return "x"
}

export const freshDatabase = async (): Promise<TestDatabase> => {
  if (pgBaseUrl === undefined) return sqliteFileDatabase()
  const name = `gw_test_${callerFile()}_${crypto.randomUUID().replaceAll("-", "").slice(0, 12)}`
  const admin = new SQL(pgBaseUrl)
  await admin.unsafe(`CREATE DATABASE ${name}`)
  await admin.close()
  return {
    url: withDatabase(pgBaseUrl, name),
    drop: async () => {
      const a = new SQL(pgBaseUrl)
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
      await a.close()
    },
  }
}
