/**
 * The data plane's preparation: plain code when every read is in memory and nothing is held,
 * the runtime when a read misses memory or spend is reserved, the same answers either way.
 */
import { describe, expect, test } from "bun:test"
import { Exit, Option } from "effect"
import type { Preparation } from "../../src/pipeline/pre-model.js"
import { preparerOf } from "../../src/testing/stores.js"
import { newUserKey, useServices } from "../support/services.js"

const services = useServices()

const preparer = () => preparerOf(services())

/** A fresh user's key; `limit` makes every request hold a reservation. */
const newKey = (limit: number | null = null) =>
  services().runPromise(newUserKey({ name: "prepare", limit, limitReset: null, includeByokInLimit: false }))

const headersFor = (secret: string) => new Headers({ authorization: `Bearer ${secret}`, "content-type": "application/json" })
const body = JSON.stringify({ model: "demo/echo", input: "Hello there" })

/** Completes a preparation the way the route does; the ApiError's tag when refused. */
const complete = async (p: Preparation) => {
  if (p.ready !== undefined) return p.ready
  if (p.refused !== undefined) return p.refused._tag
  const exit = await services().runPromiseExit(p.pending())
  if (Exit.isSuccess(exit)) return exit.value
  return exit.cause._tag === "Fail" ? exit.cause.error._tag : "defect"
}

describe("prepare", () => {
  test("a key not in memory is loaded on the runtime once; the next request is ready at once", async () => {
    const { secret } = await newKey()
    const prepare = await preparer()
    const first = prepare.prepare(headersFor(secret), body)
    expect(first.pending).toBeDefined()
    const decided = await complete(first)
    expect(typeof decided).toBe("object")
    const second = prepare.prepare(headersFor(secret), body)
    expect(second.ready).toBeDefined()
    expect(second.ready?.request.model).toBe("demo/echo")
    expect(second.ready?.plan.candidates.length).toBeGreaterThan(0)
    expect(Option.isNone(second.ready!.reservation)).toBe(true)
  })

  test("a key with a limit: the first request goes through the runtime (it takes a budget slice), the next is admitted in memory against it", async () => {
    const { secret } = await newKey(5)
    const prepare = await preparer()
    const first = prepare.prepare(headersFor(secret), body)
    expect(first.ready).toBeUndefined()
    const decided = await complete(first)
    expect(typeof decided === "object" && Option.isSome(decided.reservation)).toBe(true)
    // Admitted in memory: no runtime call, and the reservation is held against the process's slice.
    const again = prepare.prepare(headersFor(secret), body)
    expect(again.pending).toBeUndefined()
    expect(again.ready !== undefined && Option.isSome(again.ready.reservation) && again.ready.reservation.value.slice !== undefined).toBe(true)
  })

  test("refusals are the same on both paths: unknown key, missing key, bad body, unknown model", async () => {
    const { secret } = await newKey()
    const prepare = await preparer()
    expect(await complete(prepare.prepare(headersFor(`sk-gw-v1-${"0".repeat(64)}`), body))).toBe("Unauthorized")
    expect(await complete(prepare.prepare(new Headers(), body))).toBe("Unauthorized")
    // The first of these loads the key (runtime), the rest are decided in memory.
    for (let round = 0; round < 2; round++) {
      expect(await complete(prepare.prepare(headersFor(secret), "{not json"))).toBe("BadRequest")
      expect(await complete(prepare.prepare(headersFor(secret), JSON.stringify({ model: "demo/echo", input: 7 })))).toBe(
        "BadRequest",
      )
      expect(await complete(prepare.prepare(headersFor(secret), JSON.stringify({ model: "no/such", input: "x" })))).toBe(
        "NotFound",
      )
      expect(
        await complete(prepare.prepare(headersFor(secret), JSON.stringify({ model: "@preset/missing", input: "x" }))),
      ).toBe("NotFound")
    }
  })
})
