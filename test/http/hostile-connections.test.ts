/**
 * Connections a client never finishes are not held. The key is checked from the
 * headers before a body is read, early refusals close the connection, bodies have a deadline,
 * silent connections are closed after `idle_timeout_s` (also after an answered request), and
 * requests in flight are capped overall and per client address. A client gone before its body
 * arrived is a 499, not a server error. Partial bodies are sent over raw sockets.
 *
 * Waits are bounds, not timings: on the old code these connections were never answered or closed.
 * Bun checks idle timeouts every few seconds, so a 1 s idle timeout closes within ~4-8 s.
 */
import { describe, expect, test } from "bun:test"
import { Context, Effect } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { startTestGateway, useGateway, metricsAuth } from "../support/gateway.js"
import { headerOf, postHead, rawConnect, statusOf } from "../support/raw.js"

const BODY = JSON.stringify({ model: "demo/echo", input: "one two three" })
/** Long enough for any bound below on a loaded machine; the old code never answered at all. */
const ANSWER_MS = 5_000
/** Bun's idle sweep runs every few seconds: a 1 s idle timeout closes a connection within ~4-12 s. */
const IDLE_CLOSE_MS = 20_000

const gw = useGateway({ idleTimeoutS: 1, bodyTimeoutMs: 300 })

const metricsLine = async (route: string, status: number) => {
  const text = await (await fetch(`${gw().url}/metrics`, { headers: metricsAuth })).text()
  const line = text.split("\n").find((l) => l.startsWith(`gateway_http_requests_total{route="${route}",method="POST",status="${status}"}`))
  return line === undefined ? 0 : Number(line.split(" ").pop())
}

const keyStats = () => Context.get(gw().server.runtime.runSync(Effect.context<KeyStore>()), KeyStore).cacheStats()

describe("the key is checked before the body is read", () => {
  test("a keyless request declaring 1000 bytes and sending 5 gets 401 and the connection closed, its body not awaited", async () => {
    for (const path of ["/v1/responses", "/v1/keys"]) {
      const c = await rawConnect(gw().server.port)
      c.write(`${postHead(path, 1000)}hello`)
      expect(await c.waitClosed(ANSWER_MS)).toBe(true)
      expect(statusOf(c.text())).toBe(401)
      expect(headerOf(c.text(), "connection")).toBe("close")
      expect(c.text()).toContain('"code":401')
    }
  })

  test("a key of the wrong shape on a partial body is refused at once, without a store lookup", async () => {
    const before = keyStats().misses
    for (const key of [`sk-gw-v1-${"z".repeat(64)}`, `sk-gw-v1-${"0".repeat(63)}`, "a".repeat(300), "clé-ünïcode"]) {
      const c = await rawConnect(gw().server.port)
      c.write(`${postHead("/v1/responses", 1000, { authorization: `Bearer ${key}` })}hello`)
      expect(await c.waitClosed(ANSWER_MS)).toBe(true)
      expect(statusOf(c.text())).toBe(401)
      expect(c.text()).toContain("Invalid API key")
    }
    expect(keyStats().misses).toBe(before)
  })

  test("an unknown key is looked up once, then answered from the cache of misses (both planes)", async () => {
    const unknown = `sk-gw-v1-${"1".repeat(64)}`
    const before = keyStats()
    for (let i = 0; i < 4; i++) {
      const res = await gw().fetch("/v1/responses", { method: "POST", key: unknown, json: { model: "demo/echo", input: "x" } })
      expect(res.status).toBe(401)
      expect(res.headers.get("connection")).toBe("close")
      await res.text()
      expect((await gw().fetch("/v1/key", { key: unknown })).status).toBe(401)
    }
    const after = keyStats()
    expect(after.misses - before.misses).toBe(1)
    expect(after.hits - before.hits).toBeGreaterThanOrEqual(7)
  })

  test("a key created after its secret was refused works at once (creating a key clears the misses)", async () => {
    const secret = `sk-gw-v1-${"2".repeat(64)}`
    const json = { model: "demo/echo", input: "x" }
    expect((await gw().fetch("/v1/responses", { method: "POST", key: secret, json })).status).toBe(401)
    await gw().server.runtime.runPromise(
      Effect.gen(function* () {
        const workspaceId = yield* (yield* Users).ensure("user_created_later")
        yield* (yield* KeyStore).create({ userId: "user_created_later", workspaceId, name: "later", secret })
      }),
    )
    expect((await gw().fetch("/v1/responses", { method: "POST", key: secret, json })).status).toBe(200)
    expect((await gw().fetch("/v1/key", { key: secret })).status).toBe(200)
  })

  test("a cached key is looked up once per request (the check before the body is the only one)", async () => {
    await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "warm" } })
    const before = keyStats()
    expect((await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "x" } })).status).toBe(200)
    const after = keyStats()
    expect(after.hits + after.misses - before.hits - before.misses).toBe(1)
  })
})

describe("bodies have a deadline", () => {
  test("an authenticated body that stalls gets 408 and the connection closed after the body deadline (both planes)", async () => {
    for (const path of ["/v1/responses", "/v1/keys"]) {
      const c = await rawConnect(gw().server.port)
      c.write(`${postHead(path, 1000, { authorization: `Bearer ${gw().adminKey}` })}{"mo`)
      expect(await c.waitClosed(ANSWER_MS)).toBe(true)
      expect(statusOf(c.text())).toBe(408)
      expect(headerOf(c.text(), "connection")).toBe("close")
      expect(c.text()).toContain("did not arrive in time")
    }
  })

  test("a body declared over the maximum (413) or of another type (415) is refused and the connection closed, unread", async () => {
    const auth = { authorization: `Bearer ${gw().adminKey}` }
    const max = gw().server.settings.maxBodyBytes
    for (const path of ["/v1/responses", "/v1/keys"]) {
      for (const [head, status] of [
        [postHead(path, max + 1, auth), 413],
        [postHead(path, 1000, auth).replace("content-type: application/json", "content-type: text/plain"), 415],
      ] as const) {
        const c = await rawConnect(gw().server.port)
        c.write(`${head}{"mo`)
        expect(await c.waitClosed(ANSWER_MS)).toBe(true)
        expect([path, statusOf(c.text()), headerOf(c.text(), "connection")]).toEqual([path, status, "close"])
      }
    }
  })

  test("a body that arrives in parts within its deadline is served", async () => {
    const c = await rawConnect(gw().server.port)
    c.write(postHead("/v1/responses", Buffer.byteLength(BODY), { authorization: `Bearer ${gw().adminKey}` }))
    await Bun.sleep(50)
    c.write(BODY.slice(0, 10))
    await Bun.sleep(50)
    c.write(BODY.slice(10))
    expect(await c.waitFor('"status":"completed"', ANSWER_MS)).toBe(true)
    expect(statusOf(c.text())).toBe(200)
    c.destroy()
  })

  test("a client that disconnects before its body arrives is counted as 499, not 500 (both planes)", async () => {
    for (const path of ["/v1/responses", "/v1/keys"]) {
      const before = { s499: await metricsLine(path, 499), s500: await metricsLine(path, 500) }
      const c = await rawConnect(gw().server.port)
      c.write(`${postHead(path, 1000, { authorization: `Bearer ${gw().adminKey}` })}{"mo`)
      await Bun.sleep(50)
      c.destroy()
      let seen = 0
      for (let i = 0; i < 100 && seen === 0; i++) {
        await Bun.sleep(20)
        seen = (await metricsLine(path, 499)) - before.s499
      }
      expect([path, seen]).toEqual([path, 1])
      expect(await metricsLine(path, 500)).toBe(before.s500)
    }
  })
})

describe("silent connections are closed after idle_timeout_s", () => {
  test(
    "after an answered request (JSON, stream, control plane, health) the kept-alive connection is closed when idle",
    async () => {
      const auth = { authorization: `Bearer ${gw().adminKey}` }
      const stream = JSON.stringify({ model: "demo/echo", input: "one two", stream: true })
      const cases = [
        { send: `${postHead("/v1/responses", Buffer.byteLength(BODY), auth)}${BODY}`, until: '"status":"completed"' },
        { send: `${postHead("/v1/responses", Buffer.byteLength(stream), auth)}${stream}`, until: "[DONE]" },
        { send: `GET /v1/key HTTP/1.1\r\nhost: gateway\r\nauthorization: ${auth.authorization}\r\n\r\n`, until: '"data"' },
        { send: "GET /v1/health HTTP/1.1\r\nhost: gateway\r\n\r\n", until: '"ok"' },
      ]
      const closed = await Promise.all(
        cases.map(async ({ send, until }) => {
          const c = await rawConnect(gw().server.port)
          c.write(send)
          expect(await c.waitFor(until, ANSWER_MS)).toBe(true)
          // Answered, kept alive: the connection stays usable...
          expect(headerOf(c.text(), "connection")).not.toBe("close")
          // ...until it has been silent for the idle timeout.
          return c.waitClosed(IDLE_CLOSE_MS)
        }),
      )
      expect(closed).toEqual([true, true, true, true])
    },
    IDLE_CLOSE_MS + ANSWER_MS + 5_000,
  )
})

describe("requests in flight are capped", () => {
  /** Opens `n` authenticated requests whose bodies never finish: each stays in flight. */
  const hold = async (port: number, key: string, n: number) => {
    const held = []
    for (let i = 0; i < n; i++) {
      const c = await rawConnect(port)
      c.write(`${postHead("/v1/responses", 1000, { authorization: `Bearer ${key}` })}{"mo`)
      held.push(c)
    }
    // Each is in flight once the server has seen it: a later request is then over the cap.
    await Bun.sleep(200)
    return held
  }

  const expectBusy = async (url: string, key: string, message: string) => {
    const res = await fetch(`${url}/v1/responses`, {
      method: "POST",
      headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
      body: BODY,
    })
    expect(res.status).toBe(503)
    expect(res.headers.get("retry-after")).toBe("1")
    expect(res.headers.get("connection")).toBe("close")
    expect(((await res.json()) as { error: { message: string } }).error.message).toContain(message)
  }

  const served = async (url: string, key: string) => {
    for (let i = 0; i < 100; i++) {
      const res = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
        body: BODY,
      })
      await res.text()
      if (res.status === 200) return true
      await Bun.sleep(20)
    }
    return false
  }

  test.each([
    ["max_in_flight", { maxInFlight: 2 }, "requests in flight, its maximum"],
    ["max_in_flight_per_ip", { maxInFlight: 100, maxInFlightPerIp: 2 }, "the maximum per client address"],
  ])("over %s: 503 with Retry-After and Connection: close; served again once they end", async (_, limits, message) => {
    const g = await startTestGateway({ ...limits, bodyTimeoutMs: 60_000 })
    try {
      const held = await hold(g.server.port, g.adminKey, 2)
      await expectBusy(g.url, g.adminKey, message)
      for (const c of held) c.destroy()
      expect(await served(g.url, g.adminKey)).toBe(true)
    } finally {
      await g.stop()
    }
  }, 30_000)
})
