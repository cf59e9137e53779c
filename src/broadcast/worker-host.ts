/**
 * The main thread's side of the delivery Worker (src/broadcast/delivery-worker.ts): starts it,
 * restarts it when it dies (the rows it had leased are released by the next one, which resumes
 * from the rows), keeps the counters it reports for /metrics, and at shutdown asks it for a
 * last pass within the deadline.
 */
import type { BroadcastStats } from "./engine.js"
import { writerGone } from "../store/sqlite-gate.js"
import type { FromWorker, ToWorker, WorkerStart } from "./worker-protocol.js"

/** In the compiled binary (scripts/build adds the Worker as an entry point, root `.`) it is found by its path from the root. */
const workerUrl = import.meta.url.includes("/$bunfs/")
  ? "./src/broadcast/delivery-worker.ts"
  : new URL("./delivery-worker.ts", import.meta.url).href

/**
 * A Worker that died is started again after this long (at once would spin on a start that keeps
 * failing); doubling, up to RESTART_MAX_MS, while each one dies within RESTART_RESET_MS.
 */
const RESTART_MS = 200
const RESTART_MAX_MS = 10_000
const RESTART_RESET_MS = 30_000

export interface DeliveryHost {
  readonly stats: () => BroadcastStats
  readonly maintain: () => Promise<void>
  readonly resetBreaker: (destinationId: string) => void
  /** The last pass, then the Worker ends. */
  readonly finish: (deadline: number) => Promise<void>
  /** Ends the current Worker as a crash would (tests); it is restarted. */
  readonly kill: () => void
  /** Workers started so far (1 + restarts). */
  readonly starts: () => number
}

export const startDeliveryHost = (init: Omit<WorkerStart, "type" | "orphanLeases">, onError: (message: string) => void): DeliveryHost => {
  const outcomes = new Map<string, number>()
  let pending = 0
  let lagSeconds = 0
  /** Leases the current Worker took that may still hold rows. */
  let leases = new Set<number>()
  const maintained = new Map<number, () => void>()
  let nextId = 0
  let stopping = false
  let started = 0
  let finished: (() => void) | undefined
  let worker: Worker | undefined
  let restartMs = RESTART_MS

  const spawn = () => {
    started++
    const bornAt = Date.now()
    const orphans = [...leases].filter((until) => until > Date.now())
    leases = new Set()
    const w = new Worker(workerUrl)
    worker = w
    w.addEventListener("message", (event: MessageEvent<FromWorker>) => {
      const m = event.data
      switch (m.type) {
        case "lease":
          leases.add(m.until)
          w.postMessage({ type: "lease-noted", id: m.id } satisfies ToWorker)
          return
        case "stats":
          for (const [key, n] of m.outcomes) outcomes.set(key, (outcomes.get(key) ?? 0) + n)
          pending = m.pending
          lagSeconds = m.lagSeconds
          return
        case "maintained":
          maintained.get(m.id)?.()
          maintained.delete(m.id)
          return
        case "finished":
          finished?.()
          return
        case "ready":
          return
      }
    })
    w.addEventListener("error", (event) => {
      onError(`the broadcast delivery Worker failed: ${event.message}`)
      w.terminate()
    })
    w.addEventListener("close", () => {
      if (worker !== w) return
      worker = undefined
      if (init.gate !== null) writerGone(init.gate)
      // Whoever waits on it is not left waiting: maintenance runs again in the next one's passes.
      for (const done of maintained.values()) done()
      maintained.clear()
      finished?.()
      const delay = Date.now() - bornAt >= RESTART_RESET_MS ? RESTART_MS : restartMs
      restartMs = Math.min(RESTART_MAX_MS, delay * 2)
      if (!stopping) setTimeout(() => stopping || spawn(), delay)
    })
    // The process ends when the server does, not when the Worker does (Bun's Worker has `unref`; the DOM type does not).
    ;(w as Worker & { unref: () => void }).unref()
    w.postMessage({ type: "start", ...init, orphanLeases: orphans } satisfies ToWorker)
  }
  spawn()

  const send = (message: ToWorker) => worker?.postMessage(message)

  return {
    stats: () => ({ outcomes, pending, lagSeconds }),
    maintain: () =>
      new Promise<void>((resolve) => {
        if (worker === undefined) return resolve()
        const id = nextId++
        maintained.set(id, resolve)
        send({ type: "maintain", id })
      }),
    resetBreaker: (destinationId) => send({ type: "reset-breaker", destinationId }),
    finish: async (deadline) => {
      stopping = true
      const w = worker
      if (w === undefined) return
      await new Promise<void>((resolve) => {
        finished = resolve
        // A little past the deadline: the Worker's own last pass ends at it.
        setTimeout(resolve, Math.max(0, deadline - Date.now()) + 1_000)
        w.postMessage({ type: "finish", deadline } satisfies ToWorker)
      })
      worker = undefined
      w.terminate()
    },
    kill: () => worker?.terminate(),
    starts: () => started,
  }
}

const NO_OUTCOMES: ReadonlyMap<string, number> = new Map()

/**
 * A host whose Worker is started by `ensure` (or by the first call that needs it: maintenance,
 * a breaker reset): until then its counters are zero and a finish has nothing to send.
 */
export const lazyHost = (start: () => DeliveryHost): DeliveryHost & { readonly ensure: () => void } => {
  let host: DeliveryHost | undefined
  const ensure = () => {
    host ??= start()
  }
  return {
    ensure,
    stats: () => host?.stats() ?? { outcomes: NO_OUTCOMES, pending: 0, lagSeconds: 0 },
    maintain: () => {
      ensure()
      return (host as DeliveryHost).maintain()
    },
    resetBreaker: (destinationId) => {
      ensure()
      host?.resetBreaker(destinationId)
    },
    finish: (deadline) => host?.finish(deadline) ?? Promise.resolve(),
    kill: () => host?.kill(),
    starts: () => host?.starts() ?? 0,
  }
}
