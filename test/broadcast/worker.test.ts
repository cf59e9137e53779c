/**
 * The delivery Worker: a Worker ended in the middle of a send (the receiver holding its request)
 * is restarted, the rows its lease held are released, and every generation arrives in requests
 * made after the kill; the SQLite gate lets one writer in only once no main transaction is open,
 * and a Worker terminated inside a write transaction leaves the file and the gate free.
 */
import { Database } from "bun:sqlite"
import { describe, expect, test } from "bun:test"
import { Effect, Either, Option } from "effect"
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Broadcast } from "../../src/broadcast/Broadcast.js"
import type { DeliveryQueue } from "../../src/broadcast/deliveries.js"
import { makeDeliveryEngine } from "../../src/broadcast/engine.js"
import { DEFAULT_BROADCAST, parseConfigFile, TEST_BROADCAST } from "../../src/config/Config.js"
import { asWriter, enterMain, leaveMain, mainOpen, makeGate, writerGone } from "../../src/store/sqlite-gate.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { ask, createDestination, rootsBy, setBroadcast, useCleanups, waitFor } from "./support.js"

const TIMEOUT_MS = 60_000

/** This process's threads at `nice` (Linux: /proc, field 19 of a thread's stat), by id; undefined elsewhere. */
const threadsAtNice = (nice: number): Set<string> | undefined => {
  try {
    const ids = new Set<string>()
    for (const tid of readdirSync("/proc/self/task")) {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
        if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === nice) ids.add(tid)
      } catch {
        // ended between the listing and the read
      }
    }
    return ids
  } catch {
    return undefined
  }
}

/** A thread at `nice` that `before` did not have: a new Worker's (a count could be offset by another thread ending meanwhile). */
const newThreadAtNice = (nice: number, before: Set<string>) => [...(threadsAtNice(nice) ?? [])].some((tid) => !before.has(tid))

interface Held {
  readonly body: string
  readonly at: number
}

const cleanups = useCleanups(TIMEOUT_MS)

describe("the delivery Worker", () => {
  test(
    "killed mid-send, it is restarted and every generation arrives",
    async () => {
      // Requests are held unanswered until `release`: the first send is in flight when the Worker dies.
      const got: Array<Held> = []
      let release: () => void = () => undefined
      let held = new Promise<void>((r) => {
        release = r
      })
      const receiver = Bun.serve({
        port: 0,
        hostname: "127.0.0.1",
        fetch: async (req) => {
          got.push({ body: await req.text(), at: Date.now() })
          await held
          return new Response("{}")
        },
      })
      cleanups.push(() => void receiver.stop(true))
      const gw: TestGateway & { stop: () => Promise<void> } = await startTestGateway({
        allowPrivateAddresses: true,
        // A lease of 2 × 15 s + 5 s: a wait that ends well before it shows the rows were released,
        // with room for a loaded machine (8 s against a 15 s lease fell short beside other test files).
        broadcast: { ...TEST_BROADCAST, pollMs: 50, retryBaseMs: 100, timeoutMs: 15_000 },
      })
      cleanups.push(() => gw.stop())
      await setBroadcast(gw, true)
      await createDestination(gw, { name: "c", type: "otel-collector", config: { endpoint: `http://127.0.0.1:${receiver.port}` } })
      const broadcast = () => gw.server.runtime.runPromise(Broadcast)
      // Started once a destination exists (a gateway without one starts none: below).
      await waitFor(async () => (await broadcast()).workerStarts() === 1, 5_000, "the Worker started")

      const ids = await Promise.all(Array.from({ length: 24 }, (_, i) => ask(gw, { input: `survive ${i}` })))
      await waitFor(() => got.length > 0, 10_000, "a send in flight")
      const killedAt = Date.now()
      ;(await broadcast()).killWorker()
      await waitFor(async () => (await broadcast()).workerStarts() === 2, 5_000, "the restarted Worker")
      // The held request now answers a connection nobody reads; the new Worker sends again.
      release()
      held = Promise.resolve()
      const after = () => rootsBy(got.filter((r) => r.at > killedAt).map((r) => ({ method: "POST", path: "/", headers: new Headers(), body: r.body })))
      // Well within the lease (2 × timeout + 5 s): the dead Worker's rows were released, not waited out.
      await waitFor(() => ids.every((id) => after().has(id)), 20_000, "every generation after the kill")
      expect(ids.filter((id) => !after().has(id))).toEqual([])
    },
    TIMEOUT_MS,
  )
})

describe("the delivery engine's leases", () => {
  test("a claim waits until the host has noted its lease", async () => {
    // Bun's terminate drops a Worker's last posted messages: a claim made before the host heard of
    // its lease would hold rows that a restarted Worker cannot release (they wait the lease out).
    const claims: Array<number> = []
    const leases: Array<{ readonly until: number; readonly noted: () => void }> = []
    let stopping = false
    const queue: DeliveryQueue = {
      anyDue: () => Promise.resolve(true),
      claim: (_now, until) => {
        claims.push(until)
        return Promise.resolve([])
      },
      batches: () => Promise.resolve([]),
      records: () => Promise.resolve([]),
      delivered: () => Promise.resolve(),
      close: () => undefined,
    }
    const engine = makeDeliveryEngine({
      // Reached only by the maintenance after a pass, whose failure the engine logs (below, to nowhere).
      sql: undefined as never,
      run: () => Promise.reject(new Error("no database in this test")),
      log: () => undefined,
      settings: { ...TEST_BROADCAST, pollMs: 5 },
      allowPrivateAddresses: true,
      queue,
      kinds: new Map(),
      resolved: () => Effect.succeed(Option.none()),
      open: (sealed) => Either.right(sealed),
      onLease: (until) => (stopping ? Promise.resolve() : new Promise<void>((noted) => leases.push({ until, noted }))),
    })
    engine.start()
    cleanups.push(() => {
      // Its last pass takes a lease too: noted at once.
      stopping = true
      for (const lease of leases) lease.noted()
      return engine.finish(0)
    })
    await waitFor(() => leases.length === 1, 1_000, "a lease told to the host")
    await Bun.sleep(50)
    expect(claims).toEqual([])
    leases[0]?.noted()
    await waitFor(() => claims.length === 1, 1_000, "the claim once its lease is noted")
    expect(claims).toEqual([leases[0]?.until])
  })
})

describe("a gateway that broadcasts nothing", () => {
  test("starts no delivery Worker until a destination is made; by default its thread is at nice 19", async () => {
    const gw: TestGateway & { stop: () => Promise<void> } = await startTestGateway({ allowPrivateAddresses: true, broadcast: DEFAULT_BROADCAST })
    cleanups.push(() => gw.stop())
    const broadcast = () => gw.server.runtime.runPromise(Broadcast)
    await setBroadcast(gw, true)
    await ask(gw, { input: "nobody listens" })
    expect((await broadcast()).workerStarts()).toBe(0)
    const lowBefore = threadsAtNice(19)
    await createDestination(gw, { name: "late", type: "otel-collector", config: { endpoint: "http://127.0.0.1:9" } })
    const b = await broadcast()
    await waitFor(() => b.workerStarts() === 1, 5_000, "the Worker started")
    // Its thread yields the core to requests: a new thread of this process at the lowest priority.
    if (lowBefore !== undefined) await waitFor(() => newThreadAtNice(19, lowBefore), 5_000, "the Worker's thread at nice 19")
  }, 30_000)
})

describe("broadcast.worker_nice", () => {
  test("sets the Worker thread's priority", async () => {
    const before = threadsAtNice(7)
    const gw: TestGateway & { stop: () => Promise<void> } = await startTestGateway({ allowPrivateAddresses: true, broadcast: { ...TEST_BROADCAST, workerNice: 7 } })
    cleanups.push(() => gw.stop())
    await setBroadcast(gw, true)
    await createDestination(gw, { name: "seven", type: "otel-collector", config: { endpoint: "http://127.0.0.1:9" } })
    const b = await gw.server.runtime.runPromise(Broadcast)
    await waitFor(() => b.workerStarts() === 1, 5_000, "the Worker started")
    if (before !== undefined) await waitFor(() => newThreadAtNice(7, before), 5_000, "the Worker's thread at nice 7")
  }, 30_000)

  test("is read from the config file, 0 to 19; other values are refused naming it and the rule", () => {
    const file = (nice: unknown) =>
      parseConfigFile("c.json", JSON.stringify({ providers: [], models: [], broadcast: { worker_nice: nice } }))
    const read = file(0)
    expect(Either.isRight(read) && read.right.broadcast?.worker_nice).toBe(0)
    for (const bad of [20, -1, 2.5, "19"]) {
      const refused = file(bad)
      expect(Either.isLeft(refused) && refused.left.message).toContain("broadcast.worker_nice")
      expect(Either.isLeft(refused) && refused.left.message).toMatch(/must be an integer from 0 to 19|Expected an integer|Expected number/)
    }
  })
})

describe("the SQLite gate", () => {
  test("a writer waits for the main transactions open, and holds new ones until it is done", async () => {
    const gate = makeGate()
    const order: Array<string> = []
    expect(enterMain(gate)).toBe(true)
    const writing = asWriter(gate, () => {
      order.push("write")
    })
    await Bun.sleep(20)
    expect(order).toEqual([])
    // A nested transaction beside the open one is not held (the writer waits for the outer one).
    expect(enterMain(gate)).toBe(true)
    leaveMain(gate)
    leaveMain(gate)
    await writing
    expect(order).toEqual(["write"])
    // While a writer is in, a new main transaction waits for it.
    let inside: () => void = () => undefined
    const long = asWriter(gate, () => new Promise<void>((r) => (inside = r)))
    await Bun.sleep(10)
    const entered = enterMain(gate)
    expect(entered).not.toBe(true)
    let opened = false
    void (entered as Promise<void>).then(() => {
      opened = true
    })
    await Bun.sleep(20)
    expect(opened).toBe(false)
    inside()
    await long
    await waitFor(() => opened, 1_000, "the main transaction after the writer")
    leaveMain(gate)
    expect(Atomics.load(gate, 0)).toBe(0)
  })

  test("a writer whose thread ended inside is cleared by writerGone: main transactions and the next writer go in", async () => {
    const gate = makeGate()
    // A writer that never leaves: as a Worker terminated in the middle of its write.
    void asWriter(gate, () => new Promise<void>(() => {}))
    await Bun.sleep(10)
    expect(enterMain(gate)).not.toBe(true)
    writerGone(gate)
    await waitFor(() => mainOpen(gate) === 1, 1_000, "the waiting main transaction in")
    leaveMain(gate)
    expect(enterMain(gate)).toBe(true)
    leaveMain(gate)
    let wrote = false
    await asWriter(gate, () => {
      wrote = true
    })
    expect(wrote).toBe(true)
    expect(Atomics.load(gate, 0)).toBe(0)
  })

  test(
    "a Worker terminated inside a write transaction leaves the file writable, its rows rolled back",
    async () => {
      // The restart relies on it: Bun closes a terminated Worker's connections, so its open
      // transaction ends (rolled back) and releases the file's write lock; writerGone clears the gate.
      const dir = mkdtempSync(join(tmpdir(), "gw-stuck-writer-"))
      cleanups.push(() => rmSync(dir, { recursive: true, force: true }))
      const file = join(dir, "gate.db")
      const main = new Database(file, { create: true, strict: true })
      cleanups.push(() => main.close())
      main.run("PRAGMA journal_mode = WAL")
      main.run("PRAGMA busy_timeout = 0")
      main.run("CREATE TABLE t (who TEXT NOT NULL)")
      const gate = makeGate()
      const worker = new Worker(new URL("./fixtures/stuck-writer.ts", import.meta.url).href)
      const closed = new Promise<void>((resolve) => worker.addEventListener("close", () => resolve()))
      const inside = new Promise<void>((resolve) => worker.addEventListener("message", () => resolve()))
      worker.postMessage({ file, gate })
      await inside
      // While it holds the transaction: the file's write lock is taken and the gate holds main transactions.
      expect(() => main.run("INSERT INTO t (who) VALUES ('main, too early')")).toThrow(/locked|busy/i)
      expect(enterMain(gate)).not.toBe(true)
      worker.terminate()
      await closed
      writerGone(gate)
      await waitFor(() => mainOpen(gate) === 1, 1_000, "the waiting main transaction in")
      leaveMain(gate)
      await waitFor(
        () => {
          try {
            main.run("INSERT INTO t (who) VALUES ('main')")
            return true
          } catch {
            return false
          }
        },
        2_000,
        "a write on the main connection",
      )
      expect(main.query<{ who: string }, []>("SELECT who FROM t").all()).toEqual([{ who: "main" }])
    },
    TIMEOUT_MS,
  )
})
