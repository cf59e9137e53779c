/**
 * Nothing lost when the database goes away (docs/operations.md, "When the database goes away").
 * The gateway reaches Postgres through a TCP proxy the test controls, and the proxy is cut (a
 * restart, an 8 s stop) or stalled (a connection that stops without closing), under load: 16
 * connections on a key with a limit, streams and JSON answers. Afterwards every answered 200
 * has its record, each charged once (the key's usage is the sum of its records' costs), no answer
 * was a 500, an enabled destination (a webhook) receives every answered generation, the key
 * spends exactly up to its limit, and a graceful stop leaves no slice held.
 * Postgres only: the proxy sits on a TCP connection, which a SQLite file has not (its analogue, a
 * write path that fails, is in sqlite-write-failures.test.ts, with the spool's bound: on Postgres
 * a lost connection also empties the key cache, so nothing is answered long enough to fill it).
 */
import { afterAll, describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Layer, Option, Redacted } from "effect"
import { metricsAuth, TEST_METRICS_TOKEN } from "../support/gateway.js"
import { TEST_BROADCAST, demoCatalog, GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { KeyCacheOptions } from "../../src/services/KeyStore.js"
import { pennyCatalog } from "../support/catalog.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { untilListening } from "../support/spawned.js"
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js"
import { type Receiver, rootsBy, startReceiver } from "../broadcast/support.js"

/** $0.01 a request (the penny model's request price), worst case included. */
const PENNY = { model: "test/penny", input: "hi", max_output_tokens: 3 }

interface Answer {
  readonly status: number
  readonly id: string | null
  readonly retryAfter: string | null
  readonly complete: boolean
}

/** 16 connections asking until `stop`, each pausing 100 ms after an answer; every answer kept. */
const load = (url: string, key: string, stream: (i: number) => boolean) => {
  const answers: Array<Answer> = []
  let stopped = false
  let i = 0
  const worker = async () => {
    while (!stopped) {
      const n = i++
      const streamed = stream(n)
      try {
        const res = await fetch(`${url}/v1/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
          body: JSON.stringify({ ...PENNY, stream: streamed }),
        })
        const text = await res.text()
        const complete = res.status === 200 && (streamed ? text.includes("response.completed") && text.includes("[DONE]") : text.includes('"status":"completed"'))
        answers.push({ status: res.status, id: res.headers.get("x-generation-id"), retryAfter: res.headers.get("retry-after"), complete })
        // Paced (at most ~160 answers a second in all), so the key's limit outlasts the outage
        // however fast the machine is: unpaced, a quiet machine spent it before the database was back.
        await Bun.sleep(100)
      } catch {
        answers.push({ status: 0, id: null, retryAfter: null, complete: false })
        await Bun.sleep(20)
      }
    }
  }
  const workers = Array.from({ length: 16 }, worker)
  return {
    answers,
    okCount: () => answers.filter((a) => a.status === 200).length,
    stop: async () => {
      stopped = true
      await Promise.all(workers)
    },
  }
}

const until = async (what: string, check: () => Promise<boolean> | boolean, ms = 30_000) => {
  const end = Date.now() + ms
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what}: not within ${ms} ms`)
    await Bun.sleep(20)
  }
}

interface Harness {
  readonly db: TestDatabase
  readonly proxy: TcpProxy
  readonly server: RunningServer
  readonly admin: string
  readonly dir: string
}

const startHarness = async (overrides: Partial<Settings>, keyReadDeadlineMs?: number): Promise<Harness> => {
  const db = await freshDatabase()
  const target = new URL(db.url)
  const proxy = await startTcpProxy(target.hostname, Number(target.port || 5432))
  const dir = mkdtempSync(join(tmpdir(), "gw-outage-"))
  const config = GatewayConfig.layer(
    testSettings({
      databaseUrl: proxy.through(db.url),
      dataDir: dir,
      catalog: pennyCatalog,
      commitTimeoutMs: 1_000,
      metricsToken: Redacted.make(TEST_METRICS_TOKEN),
      // The webhook receiver is on loopback; delivery polls often so the test need not wait long.
      allowPrivateAddresses: true,
      broadcast: { ...TEST_BROADCAST, pollMs: 50, retryBaseMs: 100 },
      ...overrides,
    }),
  )
  const layer = keyReadDeadlineMs === undefined ? config : Layer.merge(config, Layer.succeed(KeyCacheOptions, { ttlMs: 2_000, readDeadlineMs: keyReadDeadlineMs }))
  const server = await startServer(layer as Layer.Layer<GatewayConfig>)
  return { db, proxy, server, admin: Option.getOrThrow(server.createdSecret), dir }
}

const stopHarness = async (h: Harness | undefined) => {
  if (h === undefined) return
  h.proxy.restore()
  await h.server.stop().catch(() => undefined)
  await h.proxy.close()
  await h.db.drop()
  rmSync(h.dir, { recursive: true, force: true })
}

/**
 * `ask` while the connection to Postgres stalls (6 s, then it is restored): the answer, its body, and
 * whether the stall had already ended when it came. Returns once the stall is over.
 */
const askDuringStall = async (h: Harness, ask: () => Promise<Response>) => {
  h.proxy.stall()
  let ended = false
  const restore = Bun.sleep(6_000).then(() => {
    ended = true
    h.proxy.restore()
  })
  try {
    const res = await ask()
    const restored = ended
    return { res, restored, text: await res.text() }
  } finally {
    await restore
  }
}

const makeKey = async (h: Harness, limit: number) => {
  const res = await fetch(`${h.server.url}/v1/keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${h.admin}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "outage", limit }),
  })
  expect(res.status).toBe(201)
  const body = (await res.json()) as { key: string; data: { hash: string } }
  return { secret: body.key, hash: body.data.hash }
}

/** Broadcast on for the management key's workspace (the limited key's too), and a webhook destination to `receiver`. */
const enableWebhook = async (h: Harness, receiver: Receiver) => {
  const auth = { authorization: `Bearer ${h.admin}`, "content-type": "application/json" }
  const me = (await (await fetch(`${h.server.url}/v1/key`, { headers: auth })).json()) as { data: { workspace_id: string } }
  const patched = await fetch(`${h.server.url}/v1/workspaces/${me.data.workspace_id}`, {
    method: "PATCH",
    headers: auth,
    body: JSON.stringify({ is_observability_broadcast_enabled: true }),
  })
  expect(patched.status).toBe(200)
  const made = await fetch(`${h.server.url}/v1/observability/destinations`, {
    method: "POST",
    headers: auth,
    body: JSON.stringify({ name: "outage-hook", type: "webhook", config: { url: `${receiver.url}/hook` } }),
  })
  expect(made.status).toBe(201)
}

const spoolOf = async (h: Harness): Promise<number | undefined> => {
  const res = await fetch(`${h.server.url}/v1/ready`)
  if (res.status !== 200) {
    await res.arrayBuffer()
    return undefined
  }
  return ((await res.json()) as { spool: { generations: number } }).spool.generations
}

/** Straight to Postgres (not through the proxy): what the database holds. */
const direct = async <A>(h: Harness, f: (pg: SQL) => Promise<A>): Promise<A> => {
  const pg = new SQL(h.db.url)
  try {
    return await f(pg)
  } finally {
    await pg.close()
  }
}

/** What every run must show once the database is back and the spool is committed. */
const expectNothingLost = async (h: Harness, hash: string, answers: ReadonlyArray<Answer>) => {
  const statuses = new Set(answers.map((a) => a.status))
  // Never a 500 (nor a dropped connection): 200, 402 at the limit, 503 while the store is away.
  expect([...statuses].filter((s) => s !== 200 && s !== 402 && s !== 503)).toEqual([])
  for (const a of answers.filter((x) => x.status === 503)) expect(Number(a.retryAfter)).toBeGreaterThanOrEqual(1)
  const answered = answers.filter((a) => a.status === 200)
  expect(answered.every((a) => a.complete && a.id !== null)).toBe(true)
  const ids = answered.map((a) => a.id as string)
  const recordedRows = () =>
    direct(h, (pg) => pg.unsafe("SELECT id, total_cost_nano FROM generations WHERE key_hash = $1", [hash]) as Promise<Array<{ id: string; total_cost_nano: number }>>)
  // The spool's count says nothing of a batch the writer still holds (its commit met the restart and
  // is retried): wait for the records rather than read once; one never written fails below all the same.
  let rows = await recordedRows()
  await until("every answer's record", async () => {
    rows = await recordedRows()
    const have = new Set(rows.map((r) => r.id))
    return ids.every((id) => have.has(id))
  }).catch(() => undefined)
  const recorded = new Set(rows.map((r) => r.id))
  // Every answered 200 has its record, and no record without an answer: each written once.
  expect(ids.filter((id) => !recorded.has(id))).toEqual([])
  expect(rows.length).toBe(ids.length)
  // Charged exactly once: the key's counted spend is the sum of its records' costs.
  const costs = rows.reduce((n, r) => n + Number(r.total_cost_nano), 0)
  const key = await direct(h, (pg) => pg.unsafe("SELECT window_spend_nano, reserved_nano FROM api_keys WHERE hash = $1", [hash]) as Promise<Array<{ window_spend_nano: number; reserved_nano: number }>>)
  expect(Number(key[0]?.window_spend_nano)).toBe(costs)
  return { costs, answered: ids.length }
}

/**
 * After recovery, the key is asked by 16 connections until it refuses them all, again until it has
 * spent its limit or 10 s have passed: within a few seconds of the database's return it spends
 * exactly up to its limit (a slice whose grant or give-back met the outage is given back once its
 * requests' settlements are committed; one left stranded would refuse the last dollars with 402).
 */
const spendToTheLimit = async (h: Harness, key: { secret: string; hash: string }, limitNano: number) => {
  const worker = async () => {
    let refusals = 0
    while (refusals < 3) {
      const res = await fetch(`${h.server.url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: JSON.stringify(PENNY),
      })
      await res.arrayBuffer()
      expect([200, 402]).toContain(res.status)
      refusals = res.status === 402 ? refusals + 1 : 0
    }
  }
  const spentNow = async () =>
    Number((await direct(h, (pg) => pg.unsafe("SELECT COALESCE(SUM(total_cost_nano), 0)::bigint AS n FROM generations WHERE key_hash = $1", [key.hash]) as Promise<Array<{ n: number }>>))[0]?.n)
  const deadline = Date.now() + 10_000
  let spent = 0
  for (;;) {
    await Promise.all(Array.from({ length: 16 }, worker))
    await until("the records committed", async () => (await spoolOf(h)) === 0)
    spent = await spentNow()
    if (spent >= limitNano || Date.now() > deadline) break
    await Bun.sleep(500)
  }
  expect(spent).toBe(limitNano)
  const view = await fetch(`${h.server.url}/v1/keys/${key.hash}`, { headers: { authorization: `Bearer ${h.admin}` } })
  const body = (await view.json()) as { data: { limit_remaining: number | null } }
  expect(body.data.limit_remaining).toBe(0)
}

/** After a graceful stop: no slice and no hold of the key left, nothing reserved on it. */
const expectNothingHeld = async (h: Harness, hash: string) => {
  await h.server.stop()
  const rows = await direct(h, (pg) => pg.unsafe("SELECT COUNT(*)::int AS n FROM reservations") as Promise<Array<{ n: number }>>)
  expect(Number(rows[0]?.n)).toBe(0)
  const key = await direct(h, (pg) => pg.unsafe("SELECT reserved_nano FROM api_keys WHERE hash = $1", [hash]) as Promise<Array<{ reserved_nano: number }>>)
  expect(Number(key[0]?.reserved_nano)).toBe(0)
}

const outageRun = (durable: boolean) =>
  describe(`a restart and an 8 s stop of Postgres under load, durable answers ${durable ? "on" : "off"}`, () => {
    let h: Harness | undefined
    const receiver = startReceiver()
    afterAll(async () => {
      await stopHarness(h)
      receiver.stop()
    })
    test(
      "every answered 200 is recorded, charged once and broadcast, no 500, the key spends exactly to its limit, a graceful stop holds nothing",
      async () => {
        h = await startHarness({ durableAnswers: durable })
        await enableWebhook(h, receiver)
        // Out of reach of the paced load during the outage (~15 s at most ~160 a second): spent to the end after recovery.
        const LIMIT = 60
        const key = await makeKey(h, LIMIT)
        const run = load(h.server.url, key.secret, (i) => i % 2 === 1)
        const harness = h
        // A restart: every connection dropped, none accepted for 1.5 s.
        await until("first answers", () => run.okCount() >= 20)
        await Bun.sleep(1_000)
        harness.proxy.cut()
        await Bun.sleep(1_500)
        harness.proxy.restore()
        // An 8 s stop.
        await Bun.sleep(1_000)
        harness.proxy.cut()
        await Bun.sleep(1_000)
        // The control plane during the stop: the contract's 503 with Retry-After, not a 500.
        const during = await fetch(`${harness.server.url}/v1/keys/${key.hash}`, { headers: { authorization: `Bearer ${harness.admin}` } })
        expect(during.status).toBe(503)
        expect(Number(during.headers.get("retry-after"))).toBeGreaterThanOrEqual(1)
        expect((await during.json()) as unknown).toMatchObject({ error: { code: 503 } })
        await Bun.sleep(7_000)
        harness.proxy.restore()
        const after = run.okCount()
        await until("answers after the stop", () => run.okCount() >= after + 20, 60_000)
        await Bun.sleep(1_000)
        await run.stop()
        await until("the spool committed", async () => (await spoolOf(harness)) === 0)
        const { answered } = await expectNothingLost(harness, key.hash, run.answers)
        expect(answered).toBeGreaterThan(0)
        // The enabled destination receives every answered generation, the spooled ones included
        // (their outbox rows were spooled and committed with them).
        const ids = run.answers.filter((a) => a.status === 200).map((a) => a.id as string)
        const missing = () => {
          const got = rootsBy(receiver.received)
          return ids.filter((id) => !got.has(id))
        }
        await until("every answered generation at the webhook", () => missing().length === 0, 60_000).catch(() => undefined)
        expect(missing()).toEqual([])
        // Some were answered while the database was away and went through the spool, or were refused with 503.
        const metrics = await (await fetch(`${harness.server.url}/metrics`, { headers: metricsAuth })).text()
        const spooled = Number(/gateway_ledger_spooled_rows_total (\d+)/.exec(metrics)?.[1] ?? 0)
        const refused = run.answers.filter((a) => a.status === 503).length
        expect(spooled + refused).toBeGreaterThan(0)
        expect(Number(/gateway_ledger_replayed_rows_total (\d+)/.exec(metrics)?.[1] ?? -1)).toBe(spooled)
        await spendToTheLimit(harness, key, LIMIT * 1e9)
        await expectNothingHeld(harness, key.hash)
      },
      120_000,
    )
  })

describe.skipIf(engine !== "postgres")("Postgres outages (a TCP proxy between the gateway and Postgres; needs GATEWAY_TEST_PG_URL)", () => {
  outageRun(false)
  outageRun(true)

  describe("a connection that stalls without closing", () => {
    let h: Harness | undefined
    afterAll(() => stopHarness(h))
    test(
      "commits that do not end within ledger.commit_timeout_ms are spooled; after the stall nothing is lost or written twice",
      async () => {
        h = await startHarness({ durableAnswers: true })
        const harness = h
        const key = await makeKey(h, 1_000)
        const run = load(h.server.url, key.secret, (i) => i % 3 === 0)
        await until("first answers", () => run.okCount() >= 100)
        harness.proxy.stall()
        await Bun.sleep(3_000)
        harness.proxy.restore()
        const after = run.okCount()
        await until("answers after the stall", () => run.okCount() >= after + 100)
        await run.stop()
        await until("the spool committed", async () => (await spoolOf(harness)) === 0)
        await expectNothingLost(harness, key.hash, run.answers)
        const metrics = await (await fetch(`${harness.server.url}/metrics`, { headers: metricsAuth })).text()
        // The stalled commits did time out into the spool (whatever of them later went through is not written twice).
        expect(Number(/gateway_ledger_spooled_rows_total (\d+)/.exec(metrics)?.[1] ?? 0)).toBeGreaterThan(0)
        await expectNothingHeld(harness, key.hash)
      },
      50_000,
    )
  })


  describe("a key read on a connection that stalls", () => {
    let h: Harness | undefined
    afterAll(() => stopHarness(h))
    test("a key not yet cached gets 503 with Retry-After at the read's deadline, not held for the stall", async () => {
      h = await startHarness({}, 1_000)
      const harness = h
      const key = await makeKey(h, 1_000)
      const { res, restored } = await askDuringStall(harness, () =>
        fetch(`${harness.server.url}/v1/responses`, {
          method: "POST",
          headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
          body: JSON.stringify({ model: "test/penny", input: "hi" }),
        }),
      )
      // Answered while the connection still stalled: the deadline, not the stall's end, ended it.
      expect([res.status, restored, Number(res.headers.get("retry-after")) > 0]).toEqual([503, false, true])
      const after = await fetch(`${harness.server.url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${key.secret}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "test/penny", input: "hi" }),
      })
      expect(after.status).toBe(200)
    }, 30_000)
  })

  describe("a control-plane read on a connection that stalls", () => {
    let h: Harness | undefined
    afterAll(() => stopHarness(h))
    test("gets 503 with Retry-After at the commit timeout, not held for the stall; after it, reads answer", async () => {
      h = await startHarness({})
      const harness = h
      const get = () => fetch(`${harness.server.url}/v1/keys`, { headers: { authorization: `Bearer ${harness.admin}` } })
      // The management key is read once, so that it is cached: the stalled read is the list's.
      expect((await get()).status).toBe(200)
      const { res, text, restored } = await askDuringStall(harness, get)
      // Answered while the connection still stalled: the deadline (commitTimeoutMs, 1 s here), not the stall's end.
      expect([res.status, restored, Number(res.headers.get("retry-after")) > 0]).toEqual([503, false, true])
      expect(text).toContain("did not answer within 1000 ms")
      await until("the list answers after the stall", async () => (await get()).status === 200, 15_000)
    }, 30_000)
  })

  describe("a process killed with SIGKILL during a stop, durable answers on", () => {
    const root = join(import.meta.dir, "..", "..")
    const KEY = `sk-test-outage-${crypto.randomUUID().replaceAll("-", "")}`
    const running: Array<ReturnType<typeof Bun.spawn>> = []
    let db: TestDatabase | undefined
    let proxy: TcpProxy | undefined
    let dir = ""
    afterAll(async () => {
      for (const p of running) p.kill("SIGKILL")
      await Promise.all(running.map((p) => p.exited))
      await proxy?.close()
      await db?.drop()
      if (dir !== "") rmSync(dir, { recursive: true, force: true })
    })
    const start = async (url: string) => {
      const config = join(dir, "config.json")
      writeFileSync(config, JSON.stringify({ ...demoCatalog, instance_id: "outage-kill", ledger: { durable_answers: true, commit_timeout_ms: 1_000 } }))
      const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
        cwd: dir,
        env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: url, GATEWAY_CONFIG: config, GATEWAY_MANAGEMENT_KEY: KEY, GATEWAY_LOG_LEVEL: "none" },
        stdout: "pipe",
        stderr: "inherit",
      })
      running.push(proc)
      return { proc, url: await untilListening(proc) }
    }
    const answer = async (base: string, input: string) => {
      const res = await fetch(`${base}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "demo/echo", input, stream: true, provider: { order: ["fake"] } }),
      })
      const text = await res.text()
      return { status: res.status, id: res.headers.get("x-generation-id") ?? "", complete: text.includes("response.completed") && text.includes("[DONE]") }
    }

    test(
      "restarted after the database is back, it commits its spool before serving: nothing it answered is lost",
      async () => {
        db = await freshDatabase()
        const target = new URL(db.url)
        proxy = await startTcpProxy(target.hostname, Number(target.port || 5432))
        dir = mkdtempSync(join(tmpdir(), "gw-outage-kill-"))
        const first = await start(proxy.through(db.url))
        expect((await answer(first.url, "warm")).status).toBe(200)
        // Streams in flight when Postgres goes away (admitted already: slow answers, 150 ms between words).
        const inFlight = Promise.all(Array.from({ length: 8 }, (_, i) => answer(first.url, `one two three four ${i} [slow:150]`)))
        await Bun.sleep(300)
        proxy.cut()
        const answered = await inFlight
        // Durable answers: complete only once each record is on disk in the spool (the database is away).
        expect(answered.every((a) => a.status === 200 && a.complete)).toBe(true)
        first.proc.kill("SIGKILL")
        await first.proc.exited
        const spoolFile = join(dir, "ledger-spool.outage-kill.jsonl")
        expect(statSync(spoolFile).size).toBeGreaterThan(0)
        proxy.restore()
        const second = await start(proxy.through(db.url))
        const ids = answered.map((a) => a.id)
        const pg = new SQL(db.url)
        const rows = (await pg.unsafe("SELECT id FROM generations WHERE id = ANY($1)", [ids])) as Array<{ id: string }>
        await pg.close()
        // Listening means the spool was committed first.
        expect(rows.length).toBe(ids.length)
        expect(existsSync(spoolFile)).toBe(false)
        expect((await answer(second.url, "after")).status).toBe(200)
      },
      45_000,
    )
  })
})
