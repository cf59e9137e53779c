/**
 * One destination's share of a pass: its claimed rows in sends of up to `broadcast.batch_size`
 * generations, at most `concurrency_per_destination` at once, each filtered, built, sent and its
 * rows marked; behind a circuit breaker that opens after consecutive failed sends (for 5 s,
 * doubling, at most 5 minutes) and leaves the destination out of claims while open.
 */
import { Effect, Exit, Option } from "effect"
import { now as clockNow } from "../clock.js"
import type { ResolvedDestination } from "../services/Destinations.js"
import type { OutboundRequest } from "./exporter.js"
import { exporterFor } from "./exporters/index.js"
import { batchesOf, itemsOf } from "./bodies.js"
import type { ClaimedRow } from "./deliveries.js"
import { type Breaker, count, type EngineState, generationsIn, type Pass } from "./engine-state.js"
import { forget, markDead, markFailed, noteError, release } from "./row-outcomes.js"
import { sendAll } from "./send.js"

/** Consecutive failed sends that open a destination's breaker; it stays open BREAKER_OPEN_MS (doubling, capped). */
const BREAKER_THRESHOLD = 5
const BREAKER_OPEN_MS = 5_000
const BREAKER_MAX_MS = 5 * 60_000

const breakerOf = ({ breakers }: EngineState, id: string): Breaker => {
  let b = breakers.get(id)
  if (b === undefined) {
    b = { failures: 0, openUntil: 0, opens: 0 }
    breakers.set(id, b)
  }
  return b
}

/** Destinations not to claim for now: breaker open, or as many sends in flight as allowed. */
export const unavailable = ({ breakers, inFlight, deps }: EngineState, now: number): Array<string> => {
  const out: Array<string> = []
  for (const [id, b] of breakers) if (b.openUntil > now) out.push(id)
  for (const [id, n] of inFlight) if (n >= deps.settings.concurrencyPerDestination) out.push(id)
  return out
}

/** One send to one destination: filtered, built, sent, and its rows marked. */
const deliverBatch = async (state: EngineState, destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>, timeoutMs: number, pass: Pass) => {
  const kind = destination.type
  const dead = async (reason: string, which: ReadonlyArray<ClaimedRow>) => {
    await markDead(state, destination.id, which.map((r) => r.batch_id), reason)
    count(state, kind, "dead", generationsIn(which))
  }
  if (!destination.enabled) return dead("the destination is disabled", rows)
  const exporter = exporterFor(state.deps.kinds, kind)
  if ("unsupported" in exporter) return dead(exporter.unsupported, rows)
  const { items, kept, options } = await itemsOf(state, destination, rows, pass)
  if (kept.length === 0) return
  const requests: Array<OutboundRequest> = []
  for (const batch of batchesOf(state, items, options, pass)) {
    const delivery = await exporter.deliver(destination.config, batch)
    if ("unsupported" in delivery) return dead(delivery.unsupported, kept)
    requests.push(...delivery.requests)
  }
  const result = await sendAll(requests, timeoutMs, state.deps.allowPrivateAddresses)
  const breaker = breakerOf(state, destination.id)
  if (result.ok) {
    breaker.failures = 0
    breaker.opens = 0
    await state.deps.queue.delivered(destination.id, kept.map((r) => r.batch_id), clockNow())
    count(state, kind, "delivered", items.length)
    return
  }
  breaker.failures++
  if (breaker.failures >= BREAKER_THRESHOLD) {
    breaker.openUntil = clockNow() + Math.min(BREAKER_MAX_MS, BREAKER_OPEN_MS * 2 ** breaker.opens)
    breaker.opens++
    breaker.failures = 0
  }
  await noteError(state, destination.id, result.error)
  await markFailed(state, destination.id, kept, result, kind)
}

/** Sends a destination's claimed rows, up to `batch_size` generations a send, at most `concurrencyPerDestination` at once. */
export const deliverGroup = async (state: EngineState, destinationId: string, rows: ReadonlyArray<ClaimedRow>, deadline: number, pass: Pass) => {
  const { run, log, settings, resolved } = state.deps
  const found = await run(Effect.exit(resolved(destinationId)))
  if (Exit.isFailure(found)) {
    await markDead(state, destinationId, rows.map((r) => r.batch_id), "the destination's config cannot be read")
    return
  }
  if (Option.isNone(found.value)) {
    // Deleted after these rows were committed: they go too.
    await forget(state, destinationId, rows.map((r) => r.batch_id))
    return
  }
  const destination = found.value.value
  const sorted = [...rows].sort((a, b) => Number(a.created_at) - Number(b.created_at))
  const sends: Array<Array<ClaimedRow>> = []
  let size = Number.POSITIVE_INFINITY
  for (const row of sorted) {
    const last = sends.at(-1)
    if (last === undefined || size + Number(row.generations) > settings.batchSize) {
      sends.push([row])
      size = Number(row.generations)
    } else {
      last.push(row)
      size += Number(row.generations)
    }
  }
  const { inFlight } = state
  const worker = async () => {
    for (let send = sends.shift(); send !== undefined; send = sends.shift()) {
      const batchIds = send.map((r) => r.batch_id)
      const left = deadline - clockNow()
      if (left <= 0 || breakerOf(state, destinationId).openUntil > clockNow()) {
        await release(state, destinationId, batchIds, Math.max(clockNow(), breakerOf(state, destinationId).openUntil))
        continue
      }
      inFlight.set(destinationId, (inFlight.get(destinationId) ?? 0) + 1)
      try {
        await deliverBatch(state, destination, send, Math.min(settings.timeoutMs, left), pass)
      } catch (e) {
        log(Effect.logError(`Broadcast to destination ${destinationId} failed`, String(e)))
        await release(state, destinationId, batchIds, clockNow() + settings.retryBaseMs).catch(() => undefined)
      } finally {
        inFlight.set(destinationId, (inFlight.get(destinationId) ?? 1) - 1)
      }
    }
  }
  await Promise.all(Array.from({ length: Math.min(settings.concurrencyPerDestination, sends.length) }, worker))
}
