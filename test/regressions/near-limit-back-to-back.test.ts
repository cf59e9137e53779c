/**
 * A key near its limit, asked one request after another. Each answer costs far less than the hold
 * it took (its worst case), and that hold is released only in the ledger's commit of its record,
 * up to a batch window later. The next request is refused only if the limit (or the credits) cannot
 * hold it once that commit is in: not for the hold of the request before. On SQLite and, with
 * GATEWAY_TEST_PG_URL, Postgres.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect, type Layer, Option } from "effect"
import { GatewayConfig, type Settings, demoCatalog, testSettings } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"

// $1 per thousand output tokens: a request of max_output_tokens 1000 may cost $1; the echo of "hi" costs a few tenths of a cent.
const catalog: ConfigFile = {
  ...demoCatalog,
  models: [
    ...demoCatalog.models,
    { id: "test/dear", context_length: 100_000, endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0, completion: 1_000 } }] },
  ],
}

const ask = async (server: RunningServer, key: string) => {
  const res = await fetch(`${server.url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "test/dear", input: "hi", max_output_tokens: 1000 }),
  })
  const body = (await res.json()) as { usage?: { cost?: number }; error?: { message: string } }
  return { status: res.status, cost: body.usage?.cost ?? 0, message: body.error?.message ?? "" }
}

const inOrder = async (server: RunningServer, key: string, n: number) => {
  const answers: Array<Awaited<ReturnType<typeof ask>>> = []
  for (let i = 0; i < n; i++) answers.push(await ask(server, key))
  return answers
}

const serve = async (overrides: Partial<Settings>) => {
  const db = await freshDatabase()
  const server = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, catalog, ...overrides })) as Layer.Layer<GatewayConfig>)
  return { db, server, admin: Option.getOrThrow(server.createdSecret) }
}

describe(`one request after another near the limit (${engine})`, () => {
  let db: TestDatabase
  let server: RunningServer
  let admin: string
  beforeAll(async () => {
    ;({ db, server, admin } = await serve({}))
  })
  afterAll(async () => {
    await server?.stop()
    await db?.drop()
  })

  const makeKey = async (limit: number) => {
    const res = await fetch(`${server.url}/v1/keys`, {
      method: "POST",
      headers: { authorization: `Bearer ${admin}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "near", limit }),
    })
    expect(res.status).toBe(201)
    return ((await res.json()) as { key: string }).key
  }

  test("a $1.50 limit and $1 worst cases: six requests in a row are all answered", async () => {
    const answers = await inOrder(server, await makeKey(1.5), 6)
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200])
    expect(answers.every((a) => a.cost > 0 && a.cost < 0.01)).toBe(true)
  })

  test("a refusal still stands once the spend has reached the limit: a limit of 2.5 answers' cost admits three, then none", async () => {
    const [probe] = await inOrder(server, await makeKey(1.5), 1)
    const cost = probe!.cost
    // A request is admitted while the window has room left (it may pass the limit by one reservation).
    const answers = await inOrder(server, await makeKey(Number((2.5 * cost).toFixed(9))), 5)
    expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 402, 402])
    expect(answers[3]!.message).toContain("may cost up to $1")
  })
})

describe(`one request after another near the credits (${engine})`, () => {
  test("$1.50 of credits and $1 worst cases: six requests in a row are all answered, and $1.001 holds one", async () => {
    const { db, server, admin } = await serve({ creditsEnforced: true, catalog: { ...catalog, credits: { enforce: true } } })
    try {
      const me = (await (await fetch(`${server.url}/v1/key`, { headers: { authorization: `Bearer ${admin}` } })).json()) as { data: { creator_user_id: string } }
      const grant = (usd: number) => server.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.addCredits(me.data.creator_user_id, usd)))
      await grant(1.5)
      const answers = await inOrder(server, admin, 6)
      expect(answers.map((a) => a.status)).toEqual([200, 200, 200, 200, 200, 200])
      // Take back all but $0.9995 of what is left: just short of one more worst case.
      const spent = answers.reduce((sum, a) => sum + a.cost, 0)
      await grant(-(0.5005 - spent))
      const after = await inOrder(server, admin, 2)
      expect(after.map((a) => a.status)).toEqual([402, 402])
      expect(after[0]!.message).toContain("Insufficient credits")
    } finally {
      await server.stop()
      await db.drop()
    }
  })
})
