/**
 * Regression (CI, Postgres, about one run in six): enforced credits were overspent by a few requests
 * under concurrency. A settlement moves a request's cost from the user's row
 * (`credits_reserved_nano`) to `spend_daily` in one commit. A credit hold's conditional UPDATE that
 * had to wait for the user's row re-checked its condition with the lowered hold but with the spend
 * its statement had read before the wait (READ COMMITTED), so the settled cost was counted nowhere
 * and the hold was admitted. The hold now locks the user's row before it reads the spend.
 *
 * Deterministic: a transaction stands in for the settlement and keeps the row locked until the
 * request's hold is seen waiting for it.
 */
import { describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { Effect, Option } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { startServer } from "../../src/http/server.js"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import { pennyCatalog } from "../support/catalog.js"
import { engine, freshDatabase } from "../support/db.js"

const NANO = 1_000_000_000

describe.skipIf(engine !== "postgres")("a credit hold waiting on a settlement (postgres)", () => {
  test("the last penny taken while it waited: the hold is refused (402) and holds nothing", async () => {
    const db = await freshDatabase()
    // Every request holds its own $0.01 (no slices), so the hold is the statement under test.
    const g = await startServer(
      GatewayConfig.layer(testSettings({ databaseUrl: db.url, catalog: { ...pennyCatalog, credits: { enforce: true } }, creditsEnforced: true, budgetSliceRequests: 0 })),
    )
    const pg = new SQL(db.url)
    try {
      const admin = Option.getOrThrow(g.createdSecret)
      const me = (await (await fetch(`${g.url}/v1/key`, { headers: { authorization: `Bearer ${admin}` } })).json()) as { data: { creator_user_id: string } }
      const user = me.data.creator_user_id
      await g.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.addCredits(user, 1)))
      // Requests in flight hold $0.99 of the $1: one more penny fits.
      await pg`UPDATE users SET credits_reserved_nano = ${0.99 * NANO} WHERE id = ${user}`

      let answered: Promise<number> | undefined
      await pg.begin(async (tx) => {
        // Elsewhere, one request settles (its penny moves from the hold to the spend) and another takes
        // the last penny: uncommitted, the user's row locked. The hold stays at $0.99, the spend is $0.01.
        await tx`UPDATE users SET credits_reserved_nano = ${0.99 * NANO} WHERE id = ${user}`
        await tx`INSERT INTO spend_daily (key_hash, day, is_byok, user_id, workspace_id, amount_nano)
          VALUES ('settled-elsewhere', '2026-01-01', 0, ${user}, 'w', ${0.01 * NANO})`
        answered = fetch(`${g.url}/v1/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "test/penny", input: "hi", max_output_tokens: 3 }),
        }).then(async (res) => {
          await res.arrayBuffer()
          return res.status
        })
        // Commit only once the hold waits for the user's row.
        for (let i = 0; i < 500; i++) {
          const waiting = await pg`SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'`
          if (waiting.length > 0) return
          await Bun.sleep(10)
        }
        throw new Error("the request's hold never waited for the user's row")
      })
      expect(await answered).toBe(402)
      await g.drain()
      const credits = await g.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.credits(user)))
      expect(credits.total_usage).toBeCloseTo(0.01, 9)
      const held = await pg`SELECT credits_reserved_nano AS held FROM users WHERE id = ${user}`
      expect(Number(held[0].held)).toBe(0.99 * NANO)
      expect((await pg`SELECT id FROM reservations`).length).toBe(0)
    } finally {
      await pg.close()
      await g.stop()
      await db.drop()
    }
  }, 30_000)
})
