/**
 * Regression (found in review): `decide` runs again after loading a missed read (workspace
 * settings, preset) and counted the key-cache hit twice; one request is one lookup
 * (GET /metrics gateway_key_cache_lookups_total).
 */
import { describe, expect, test } from "bun:test"
import { Context, Exit } from "effect"
import type { Preparation } from "../../src/pipeline/pre-model.js"
import { ContentPolicy } from "../../src/services/ContentPolicy.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { preparerOf } from "../../src/testing/stores.js"
import { newUserKey, useServices } from "../support/services.js"

const services = useServices()

const complete = async (p: Preparation) => {
  if (p.ready !== undefined) return p.ready
  if (p.refused !== undefined) return p.refused._tag
  const exit = await services().runPromiseExit(p.pending())
  return Exit.isSuccess(exit) ? exit.value : "failed"
}

describe("key cache statistics", () => {
  test("a request whose workspace settings missed memory counts one key lookup, not two", async () => {
    const rt = await services().runtime()
    const keys = Context.get(rt.context, KeyStore)
    const policy = Context.get(rt.context, ContentPolicy)
    const preparer = await preparerOf(services())
    const { secret, row } = await services().runPromise(newUserKey({ name: "m" }))
    const headers = new Headers({ authorization: `Bearer ${secret}` })
    const body = JSON.stringify({ model: "demo/echo", input: "hi" })
    await complete(preparer.prepare(headers, body)) // loads key and settings
    await services().runPromise(policy.invalidate(row.workspace_id))
    const before = keys.cacheStats()
    await complete(preparer.prepare(headers, body))
    const after = keys.cacheStats()
    expect(after.hits + after.misses - before.hits - before.misses).toBe(1)
  })
})
