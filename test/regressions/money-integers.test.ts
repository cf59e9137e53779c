/**
 * Regression: money drifted in floating point. On Postgres a $0.05 limit at $0.01 a
 * request admitted 6 in 11 of 11 trials: holds and spend in DOUBLE PRECISION summed to
 * 0.049999999999999996 < 0.05. Money is now integers of nano-dollars on both engines, so the
 * limit check and every sum are exact, and the API shows the USD of those integers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, Either, Option } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Spend } from "../../src/services/Spend.js"
import type { Users } from "../../src/services/Users.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { pennyCatalog } from "../support/catalog.js"
import { newUserKey } from "../support/services.js"


type GW = InProcessGateway & { stop: () => Promise<void> }
let gw: GW
// One gateway (one database) with credits enforced: its requests hold against the key and credits.
beforeAll(async () => {
  gw = await startInProcessGateway({ catalog: { ...pennyCatalog, credits: { enforce: true } }, creditsEnforced: true })
  const me = (await (await gw.fetch("/v1/key")).json()) as { data: { creator_user_id?: string } }
  await run(Effect.flatMap(KeyStore, (keys) => keys.addCredits(me.data.creator_user_id ?? "", 1000)))
}, 30_000)
afterAll(async () => {
  await gw?.stop()
})

const run = <A, E>(effect: Effect.Effect<A, E, KeyStore | Spend | Users>) =>
  gw.server.runtime.runPromise(effect as Effect.Effect<A, E, never>)

interface KeyView {
  readonly usage: number
  readonly limit: number | null
  readonly limit_remaining: number | null
}

describe("money counted in integer nano-dollars", () => {
  test("a $0.05 limit at $0.01 a request admits exactly 5 of 11 concurrent requests, in 11 of 11 trials; usage shows 0.05 and nothing remains", async () => {
    const admitted: Array<number> = []
    const shown: Array<KeyView> = []
    for (let trial = 0; trial < 11; trial++) {
      const made = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: `penny-${trial}`, limit: 0.05 } })).json()) as {
        key: string
        data: { hash: string }
      }
      const results = await Promise.all(
        Array.from({ length: 11 }, () =>
          gw.fetch("/v1/responses", { method: "POST", key: made.key, json: { model: "test/penny", input: "hi", max_output_tokens: 3 } }),
        ),
      )
      await Promise.all(results.map((r) => r.text()))
      expect(results.every((r) => r.status === 200 || r.status === 402)).toBe(true)
      admitted.push(results.filter((r) => r.status === 200).length)
      await gw.server.drain()
      shown.push(((await (await gw.fetch(`/v1/keys/${made.data.hash}`)).json()) as { data: KeyView }).data)
    }
    expect(admitted).toEqual(Array.from({ length: 11 }, () => 5))
    for (const view of shown) expect(view).toEqual({ ...view, usage: 0.05, limit: 0.05, limit_remaining: 0 })
  }, 60_000)

  test("five holds, three settled out of order with the rest in flight: a sixth is still refused", async () => {
    // The interleaving that drifted: reserved 0.05 - 3 × 0.01 plus spend 3 × 0.01 summed to 0.049999999999999996.
    const outcome = await run(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        const spend = yield* Spend
        const { row, userId } = yield* newUserKey({ name: "penny", limit: 0.05 })
        yield* keys.addCredits(userId, 1)
        const holds = []
        for (let i = 0; i < 5; i++) holds.push(Option.getOrThrow(yield* spend.reserve(row, 0.01, { isByok: false })))
        for (const hold of holds.slice(0, 3)) yield* spend.settle(hold, 0.01)
        const sixth = yield* Effect.either(spend.reserve(row, 0.01, { isByok: false }))
        if (Either.isRight(sixth) && Option.isSome(sixth.right)) yield* spend.settle(sixth.right.value, 0)
        for (const hold of holds.slice(3)) yield* spend.settle(hold, 0.01)
        const seventh = yield* Effect.either(spend.reserve(row, 0.01, { isByok: false }))
        return { sixth: Either.isLeft(sixth) ? sixth.left.status : 200, seventh: Either.isLeft(seventh) ? seventh.left.status : 200 }
      }),
    )
    expect(outcome).toEqual({ sixth: 402, seventh: 402 })
  })

  test("credits: $0.3 granted covers three $0.1 holds exactly, not a fourth; shown as 0.3", async () => {
    // In floating point 0.3 - 0.2 = 0.09999999999999998 < 0.1: the third hold was refused.
    const result = await run(
      Effect.gen(function* () {
        const keys = yield* KeyStore
        const spend = yield* Spend
        const { row, userId } = yield* newUserKey({ name: "no limit" })
        yield* keys.addCredits(userId, 0.3)
        const statuses: Array<number> = []
        for (let i = 0; i < 4; i++) {
          const hold = yield* Effect.either(spend.reserve(row, 0.1, { isByok: false }))
          statuses.push(Either.isLeft(hold) ? hold.left.status : 200)
        }
        return { statuses, credits: yield* keys.credits(userId) }
      }),
    )
    expect(result).toEqual({ statuses: [200, 200, 200, 402], credits: { total_credits: 0.3, total_usage: 0 } })
  })

  test("a limit over $9,000,000 (past exact nano-dollars) is refused with 400 naming the field", async () => {
    const res = await gw.fetch("/v1/keys", { method: "POST", json: { name: "huge", limit: 1e10 } })
    const body = (await res.json()) as { error: { message: string } }
    expect(res.status).toBe(400)
    expect(body.error.message).toContain("limit")
    expect(body.error.message).toContain("at most 9000000")
    const ok = await gw.fetch("/v1/keys", { method: "POST", json: { name: "large", limit: 9_000_000 } })
    expect(((await ok.json()) as { data: { limit: number; limit_remaining: number } }).data).toMatchObject({ limit: 9_000_000, limit_remaining: 9_000_000 })
  })
})
