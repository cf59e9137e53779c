/**
 * Two processes migrating one fresh database at once (replicas starting together): on Postgres
 * both created the tables and the second stopped on a duplicate type (`pg_type_typname_nsp_index`).
 * Migrations now run under an advisory lock there: one applies them, the other waits and finds
 * nothing to do; both exit 0 and each migration is applied once. Runs on the Postgres suite.
 */
import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { join } from "node:path"
import { engine, freshDatabase } from "../support/db.js"

const root = join(import.meta.dir, "..", "..")

describe.skipIf(engine !== "postgres")("gateway migrate, twice at once on a fresh Postgres database", () => {
  test("both exit 0; every migration is applied once", async () => {
    const db = await freshDatabase()
    try {
      const run = () =>
        Bun.spawn([process.execPath, "src/main.ts", "migrate"], {
          cwd: root,
          env: { ...process.env, DATABASE_URL: db.url, GATEWAY_LOG_LEVEL: "none" },
          stdout: "pipe",
          stderr: "pipe",
        })
      const procs = [run(), run()]
      const codes = await Promise.all(procs.map((p) => p.exited))
      const outs = await Promise.all(procs.map(async (p) => `${await new Response(p.stdout).text()}${await new Response(p.stderr).text()}`))
      expect([codes, outs.some((o) => o.includes("Applied:")), outs.some((o) => o.includes("Database is up to date."))]).toEqual([[0, 0], true, true])
      const sql = new SQL(db.url)
      try {
        const rows = (await sql`SELECT id, count(*)::int AS n FROM schema_migrations GROUP BY id HAVING count(*) > 1`) as Array<unknown>
        expect(rows).toEqual([])
      } finally {
        await sql.close()
      }
    } finally {
      await db.drop()
    }
  }, 60_000)
})
