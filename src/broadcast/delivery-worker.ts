/**
 * The delivery Worker (docs/broadcast.md): the delivery engine (src/broadcast/engine.ts) on a
 * thread of its own, so that the thread serving requests pays only for the outbox rows in its
 * commit. It has its own database connection (a pool of a few on Postgres), the secret key and
 * the settings from its start message; it reads each destination as it sends to it, so a change
 * reaches it at once. On a SQLite file its writes pass the gate (src/store/sqlite-gate.ts). An
 * entry point of scripts/build; src/broadcast/worker-host.ts starts it, restarts it when it dies,
 * and then it resumes from the rows.
 */
import { readlinkSync } from "node:fs"
import { setPriority } from "node:os"
import { SqlClient } from "@effect/sql"
import { Effect, Layer, ManagedRuntime } from "effect"
import { isPostgresUrl } from "../config/Config.js"
import { loggerLayer } from "../lib/log.js"
import { destinationReader } from "../services/Destinations.js"
import { keyFileSecret, makeSealer } from "../services/secrets.js"
import { asWriter } from "../store/sqlite-gate.js"
import { clientLayer } from "../store/Store.js"
import { type DeliveryQueue, sqlDeliveryQueue, sqliteDeliveryQueue } from "./deliveries.js"
import { makeDeliveryEngine } from "./engine.js"
import { REGISTERED_KINDS } from "./exporters/index.js"
import type { FromWorker, ToWorker, WorkerStart } from "./worker-protocol.js"

declare const self: Worker

/** Postgres connections of the Worker's own pool (its statements are short and few a pass). */
const WORKER_PG_POOL = 4

/**
 * The Worker's thread runs by default at the lowest priority (`broadcast.worker_nice`, 19; Linux:
 * nice per thread; CFS/EEVDF weight 15 against the request thread's 1024), so that on a core it
 * shares with the request thread delivery takes what requests leave: answers first, and under
 * sustained saturation delivery falls behind and catches up when the load eases (the rows wait,
 * bounded by the pending caps).
 * Measured (bench-broadcast, three destinations against none, one shared core, the closed loop's
 * CPU counted until every generation is delivered): at nice 5 0.50x the requests a second, the
 * fixed rate over the gateway's capacity (p99 ~48x), request thread 1.27x; at nice 19 0.74x, p99
 * 4.0x, request thread 1.17x; every generation delivered in both (docs/broadcast.md). Where the
 * process has a core to spare it changes nothing. Its price: beside other busy processes at the
 * process's priority (not the gateway's own requests) delivery gets as little; 0 keeps the Worker
 * at the process's priority.
 */
const lowerPriority = (nice: number) => {
  if (nice <= 0) return
  try {
    const tid = Number(readlinkSync("/proc/thread-self").split("/").pop())
    if (Number.isInteger(tid) && tid > 0) setPriority(tid, nice)
  } catch {
    // Not Linux, or not allowed: the Worker runs at the process's priority.
  }
}

const post = (message: FromWorker) => self.postMessage(message)

const start = async (init: WorkerStart) => {
  lowerPriority(init.broadcast.workerNice)
  const rt = ManagedRuntime.make(
    Layer.merge(clientLayer(init.databaseUrl, Math.min(WORKER_PG_POOL, init.pgPoolSize)), loggerLayer(init.logLevel)),
  )
  const log = (effect: Effect.Effect<void>) => void rt.runFork(effect)
  const sql = await rt.runPromise(SqlClient.SqlClient)
  const gate = init.gate
  const runPlain = <A>(effect: Effect.Effect<A>): Promise<A> => rt.runPromise(effect)
  // A SQLite file: every statement of the engine's own passes the gate (reads too: simpler, and rare).
  const run = gate === null ? runPlain : <A>(effect: Effect.Effect<A>): Promise<A> => asWriter(gate, () => runPlain(effect))
  const material = init.secretKey ?? (await Effect.runPromise(keyFileSecret(init.dataDir)))
  const sealer = makeSealer(material)
  const reader = destinationReader(sql, sealer)
  const queue: DeliveryQueue =
    isPostgresUrl(init.databaseUrl) || gate === null
      ? sqlDeliveryQueue(sql, runPlain)
      : sqliteDeliveryQueue(init.databaseUrl, (write) => asWriter(gate, write))

  if (init.orphanLeases.length > 0) {
    await run(
      sql`UPDATE broadcast_deliveries SET claimed_until = 0 WHERE state = 'pending'
        AND claimed_until IN ${sql.in([...init.orphanLeases])}`.pipe(Effect.asVoid, Effect.orDie),
    )
  }

  // Counts go to the main thread as they change (coalesced per turn of the event loop): /metrics is served there.
  const sent = new Map<string, number>()
  let posting = false
  const postStats = () => {
    posting = false
    const now = engine.stats()
    const outcomes: Array<readonly [string, number]> = []
    for (const [key, n] of now.outcomes) {
      const delta = n - (sent.get(key) ?? 0)
      if (delta !== 0) outcomes.push([key, delta])
      sent.set(key, n)
    }
    post({ type: "stats", outcomes, pending: now.pending, lagSeconds: now.lagSeconds })
  }
  // Leases posted to the host and not yet noted by it: their claims wait (worker-protocol.ts, "lease").
  const leasesAwaited = new Map<number, () => void>()
  let nextLease = 0
  const engine = makeDeliveryEngine({
    sql,
    run,
    log,
    settings: init.broadcast,
    allowPrivateAddresses: init.allowPrivateAddresses,
    queue,
    kinds: REGISTERED_KINDS,
    resolved: reader.resolved,
    open: sealer.open,
    onCount: () => {
      if (posting) return
      posting = true
      queueMicrotask(postStats)
    },
    onLease: (until) =>
      new Promise<void>((noted) => {
        const id = nextLease++
        leasesAwaited.set(id, noted)
        post({ type: "lease", until, id })
      }),
  })
  engine.start()
  post({ type: "ready" })

  return {
    handle: async (message: ToWorker) => {
      switch (message.type) {
        case "maintain":
          await engine.maintain()
          postStats()
          post({ type: "maintained", id: message.id })
          return
        case "lease-noted":
          leasesAwaited.get(message.id)?.()
          leasesAwaited.delete(message.id)
          return
        case "reset-breaker":
          engine.resetBreaker(message.destinationId)
          return
        case "finish":
          await engine.finish(message.deadline)
          postStats()
          queue.close()
          await rt.dispose()
          post({ type: "finished" })
          return
        case "start":
          return
      }
    },
  }
}

let running: ReturnType<typeof start> | undefined
self.onmessage = (event: MessageEvent<ToWorker>) => {
  const message = event.data
  if (message.type === "start") {
    running ??= start(message)
    return
  }
  void running?.then((r) => r.handle(message))
}
