/**
 * A fresh database per test file: SQLite in memory by default; a new Postgres database when
 * GATEWAY_TEST_PG_URL is set (e.g. postgres://postgres@127.0.0.1:5432/postgres), dropped after.
 */
import { SQL } from "bun"

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

export const freshDatabase = async (): Promise<TestDatabase> => {
  if (pgBaseUrl === undefined) return { url: ":memory:", drop: async () => {} }
  const name = `gw_test_${crypto.randomUUID().replaceAll("-", "").slice(0, 16)}`
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
