/**
 * The delivery engine (docs/broadcast.md): claims due delivery rows with a lease
 * (`UPDATE … SET claimed_until … RETURNING`, no lock held while it sends), reads and opens each
 * outbox batch they point to once, groups them per destination in sends of up to
 * `broadcast.batch_size` generations, applies the destination's filter rules, builds one OTLP
 * trace request per send (src/broadcast/payload.ts; shared by the destinations that get the same
 * generations with the same switches) and the kind's requests (the exporter registry), and sends
 * them through the safe outbound fetcher. A failure is retried with backoff (the first within
 * `retry_base_ms`, doubling, `Retry-After` honoured) up to `max_attempts`, then the row is dead
 * with its last error. Delivery is at least once: a redelivery carries the same trace and span
 * ids. Per destination: a cap on pending rows (the oldest dropped, counted), a limit of requests
 * in flight, and a circuit breaker. Delivered and dead rows are deleted after the retention.
 *
 * It runs in the delivery Worker (src/broadcast/delivery-worker.ts), off the thread that serves
 * requests, with a database connection of its own; in-thread only for an in-memory database,
 * which another thread cannot open.
 *
 * This file is the loop: claiming due rows and starting their delivery, pass after pass. Its
 * parts share one `EngineState` (src/broadcast/engine-state.ts): building the bodies
 * (src/broadcast/bodies.ts), one destination's sends with its breaker
 * (src/broadcast/destination-sends.ts), the HTTP send and its retry policy (src/broadcast/send.ts),
 * the rows' outcomes (src/broadcast/row-outcomes.ts) and the maintenance (src/broadcast/maintenance.ts).
 */
import { Effect } from "effect"
import { now as clockNow } from "../clock.js"
import type { ClaimedRow } from "./deliveries.js"
import { loadBatches } from "./bodies.js"
import { deliverGroup, unavailable } from "./destination-sends.js"
import { type BroadcastStats, type EngineDeps, type EngineState, makeEngineState, type Pass } from "./engine-state.js"
import { maintain } from "./maintenance.js"

export type { BroadcastStats, EngineDeps } from "./engine-state.js"
export { optionsOf } from "./bodies.js"
export { backoffMs, retryAfterMs, sendAll, type TestResult } from "./send.js"

/** Delivery rows per claim (each one destination's share of a commit batch: up to the ledger's batch of generations). */
const MAX_CLAIM = 200
const MAINTENANCE_MS = 5_000

/** Claims what is due and starts its delivery (the sends run beyond the tick); how many rows it claimed. */
const tick = async (state: EngineState, deadline: number): Promise<number> => {
  const { queue, settings, log } = state.deps
  const now = clockNow()
  // A read first: an idle queue costs no write (on SQLite an UPDATE takes the write lock even when it changes nothing).
  if (!(await queue.anyDue(now))) return 0
  const until = now + settings.timeoutMs * 2 + 5_000
  await state.deps.onLease?.(until)
  const claimed = await queue.claim(now, until, unavailable(state, now), MAX_CLAIM)
  if (claimed.length === 0) return 0
  const groups = new Map<string, Array<ClaimedRow>>()
  for (const row of claimed) {
    const group = groups.get(row.destination_id) ?? []
    group.push(row)
    groups.set(row.destination_id, group)
  }
  // Each batch is read and opened once for all its destinations.
  const pass: Pass = { batches: await loadBatches(state, [...new Set(claimed.map((r) => r.batch_id))]), built: state.built }
  for (const [id, rows] of groups) {
    const p: Promise<void> = deliverGroup(state, id, rows, deadline, pass)
      .catch((e: unknown) => {
        log(Effect.logError("Broadcast delivery failed", String(e)))
      })
      .finally(() => state.running.delete(p))
    state.running.add(p)
  }
  return claimed.length
}

export type DeliveryEngine = ReturnType<typeof makeDeliveryEngine>

export const makeDeliveryEngine = (deps: EngineDeps) => {
  const { log, settings } = deps
  const state = makeEngineState(deps)
  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  let ticking: Promise<void> | undefined
  let lastMaintenance = 0

  // One maintenance at a time: two at once (the loop's and the API's `maintain`) would each drop
  // the same excess over a destination's cap. A second caller waits for the first, then runs.
  let maintenance: Promise<void> = Promise.resolve()
  const maintainAlone = (): Promise<void> => {
    const next = maintenance.then(
      () => maintain(state),
      () => maintain(state),
    )
    maintenance = next
    return next
  }

  const loop = () => {
    timer = undefined
    if (stopped) return
    let claimed = 0
    ticking = (async () => {
      try {
        claimed = await tick(state, clockNow() + settings.timeoutMs)
        if (clockNow() - lastMaintenance >= MAINTENANCE_MS) {
          lastMaintenance = clockNow()
          await maintainAlone()
        }
      } catch (e) {
        log(Effect.logError("The broadcast worker's pass failed", String(e)))
      }
    })().finally(() => {
      ticking = undefined
      // A full claim means more is due: the next pass starts at once.
      // Polls on the real clock; what is due is read from the clock seam (a test's clock moves retries, not the polling).
      if (!stopped) timer = setTimeout(loop, claimed >= MAX_CLAIM ? 0 : settings.pollMs)
    })
  }

  const start = () => {
    timer = setTimeout(loop, 0)
  }

  /** Stops the loop, then sends what is due before `deadline` (the last pass at shutdown). */
  const finish = async (deadline: number) => {
    stopped = true
    if (timer !== undefined) clearTimeout(timer)
    await ticking
    try {
      await tick(state, deadline)
      while (state.running.size > 0 && clockNow() < deadline) {
        await Promise.race([Promise.all([...state.running]), new Promise((r) => setTimeout(r, Math.max(0, deadline - clockNow())))])
      }
    } catch (e) {
      log(Effect.logError("The broadcast worker's last pass failed", String(e)))
    }
  }

  const stats = (): BroadcastStats => ({ outcomes: state.outcomes, pending: state.pendingGauge, lagSeconds: state.lagGauge })

  return {
    start,
    finish,
    stats,
    maintain: maintainAlone,
    /** A redelivery: the destination's breaker starts closed. */
    resetBreaker: (id: string) => {
      state.breakers.delete(id)
    },
  } as const
}
