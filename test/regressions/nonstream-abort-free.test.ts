/**
 * Regression (found in review): a non-streamed upstream answer is read INSIDE `provider.open` (http.ts reads the whole
 * JSON body there; the fake sleeps there). A client abort or our deadline during that time makes
 * `open` reject, route.ts breaks out of the candidate loop with `endpoint === undefined`, and
 * `finalize` settles the reservation at $0 and writes NO generation record. The upstream has
 * consumed (and billed us for) the prompt and whatever it generated; the streaming path in the
 * same situation records a "cancelled" generation charged at the input estimate.
 * Now a call cut before any byte came from upstream (the fake sleeps before answering) is
 * recorded at $0, whichever ended it: the streamed one here had its answer begun, so it is charged.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { metricsAuth, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway({ requestTimeoutMs: 300 })

const ledgerOf = (hash: string) =>
  gw().server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const gens = yield* sql<{ status: string }>`SELECT status FROM generations WHERE key_hash = ${hash}`
      const spend = yield* sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${hash}`
      return { generations: gens.map((g) => g.status), spend: Number(spend[0]!.total) / 1e9 }
    }),
  )

const newKey = async (name: string) =>
  (await (await gw().fetch("/v1/keys", { method: "POST", json: { name, limit: 5 } })).json()) as { key: string; data: { hash: string } }

const BODY = { model: "demo/echo", provider: { order: ["fake"] }, input: `${"word ".repeat(40)}[slow:20]` }

describe("a non-streamed call that ends before its answer arrives", () => {
  test("client abort: recorded like the streamed one; charged only where the answer had begun", async () => {
    const streamed = await newKey("abort-stream")
    const plain = await newKey("abort-json")
    for (const [k, stream] of [
      [streamed, true],
      [plain, false],
    ] as const) {
      const controller = new AbortController()
      const pending = gw()
        .fetch("/v1/responses", { method: "POST", key: k.key, json: { ...BODY, stream }, signal: controller.signal })
        .then((r) => r.text())
        .catch(() => "")
      await Bun.sleep(150)
      controller.abort()
      await pending
    }
    await Bun.sleep(100)
    await gw().server.drain()
    const s = await ledgerOf(streamed.data.hash)
    const p = await ledgerOf(plain.data.hash)
    expect(s.generations).toEqual(["cancelled"])
    expect(s.spend).toBeGreaterThan(0)
    // The same abort on a non-streamed request is recorded too; nothing came from upstream: $0.
    expect(p.generations).toEqual(["cancelled"])
    expect(p.spend).toBe(0)
  })

  test("client abort of a JSON request: its metrics and log line say 499 (the client's), not a provider's 502", async () => {
    const k = await newKey("abort-status")
    const series = (status: number) => `gateway_http_requests_total{route="/v1/responses",method="POST",status="${status}"}`
    const countOf = async (status: number) => {
      const res = await gw().fetch("/metrics", { key: null, headers: metricsAuth })
      expect(res.status).toBe(200)
      const text = await res.text()
      const line = text.split("\n").find((l) => l.startsWith(`${series(status)} `))
      return line === undefined ? 0 : Number(line.slice(series(status).length + 1))
    }
    const [before499, before502] = [await countOf(499), await countOf(502)]
    const controller = new AbortController()
    const pending = gw()
      .fetch("/v1/responses", { method: "POST", key: k.key, json: { ...BODY, stream: false }, signal: controller.signal })
      .catch(() => undefined)
    await Bun.sleep(150)
    controller.abort()
    await pending
    await Bun.sleep(100)
    await gw().server.drain()
    expect((await ledgerOf(k.data.hash)).generations).toEqual(["cancelled"])
    expect(await countOf(499)).toBe(before499 + 1)
    expect(await countOf(502)).toBe(before502)
  })

  test("our deadline (408): the generation is recorded", async () => {
    const k = await newKey("deadline-json")
    const res = await gw().fetch("/v1/responses", { method: "POST", key: k.key, json: { ...BODY, stream: false } })
    expect(res.status).toBe(408)
    await gw().server.drain()
    // Nothing came from upstream: recorded, at $0.
    expect((await ledgerOf(k.data.hash)).generations).toEqual(["failed"])
    expect((await ledgerOf(k.data.hash)).spend).toBe(0)
    // The 408 hands out an x-generation-id that GET /generation does not know.
    const lookup = await gw().fetch(`/v1/generation?id=${res.headers.get("x-generation-id")}`)
    expect(lookup.status).toBe(200)
  })
})
