/**
 * The delivery Worker: a Worker ended in the middle of a send (the receiver holding its request)
 * is restarted, the rows its lease held are released, and every generation arrives in requests
 * made after the kill; the SQLite gate lets one writer in only once no main transaction is open.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { readdirSync, readFileSync } from "node:fs"
import { Broadcast } from "../../src/broadcast/Broadcast.js"
import { DEFAULT_BROADCAST } from "../../src/config/Config.js"
import { asWriter, enterMain, leaveMain, makeGate } from "../../src/store/sqlite-gate.js"
import { startTestGateway, type TestGateway } from "../support/gateway.js"
import { ask, createDestination, rootsBy, setBroadcast, waitFor } from "./support.js"

const TIMEOUT_MS = 60_000

/** How many of this process's threads run at `nice` (Linux: /proc, field 19 of a thread's stat); undefined elsewhere. */
const threadsAtNice = (nice: number): number | undefined => {
  try {
    let n = 0
    for (const tid of readdirSync("/proc/self/task")) {
      try {
        const stat = readFileSync(`/proc/self/task/${tid}/stat`, "utf8")
        if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[16]) === nice) n++
      } catch {
        // ended between the listing and the read
      }
    }
    return n
  } catch {
    return undefined
  }
}

interface Held {
  readonly body: string
  readonly at: number
}

const cleanups: Array<() => Promise<void> | void> = []
afterAll(async () => {
  for (const c of cleanups.reverse()) await c()
}, TIMEOUT_MS)

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
        broadcast: { ...DEFAULT_BROADCAST, pollMs: 50, retryBaseMs: 100, timeoutMs: 15_000 },
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

describe("a gateway that broadcasts nothing", () => {
  test("starts no delivery Worker until a destination is made", async () => {
    const gw: TestGateway & { stop: () => Promise<void> } = await startTestGateway({ allowPrivateAddresses: true })
    cleanups.push(() => gw.stop())
    const broadcast = () => gw.server.runtime.runPromise(Broadcast)
    await setBroadcast(gw, true)
    await ask(gw, { input: "nobody listens" })
    expect((await broadcast()).workerStarts()).toBe(0)
    const lowBefore = threadsAtNice(19)
    await createDestination(gw, { name: "late", type: "otel-collector", config: { endpoint: "http://127.0.0.1:9" } })
    const b = await broadcast()
    await waitFor(() => b.workerStarts() === 1, 5_000, "the Worker started")
    // Its thread yields the core to requests: one more thread of this process at the lowest priority.
    if (lowBefore !== undefined) await waitFor(() => (threadsAtNice(19) ?? 0) > lowBefore, 5_000, "the Worker's thread at nice 19")
  }, 30_000)
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
})
