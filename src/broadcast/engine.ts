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
 */
import { now as clockNow } from "../clock.js"
import { SqlClient } from "@effect/sql"
import { Effect, Either, Exit, Option } from "effect"
import type { BroadcastSettings } from "../config/Config.js"
import type { ResolvedDestination } from "../services/Destinations.js"
import { OutboundError, safeFetch } from "../outbound/fetch.js"
import { type OutboundRequest, type TraceBatch, traceBatch } from "./exporter.js"
import { exporterFor } from "./exporters/index.js"
import { compileFilter, passAll } from "./filters.js"
import type { ClaimedRow, DeliveryQueue } from "./deliveries.js"
import { deleteDeliveries } from "./queue.js"
import {
  contentsOf,
  type DeliveryContent,
  type DeliveryPayload,
  needsRecord,
  type OutboxItems,
  otlpOf,
  payloadFrom,
  type PayloadRow,
  subjectOf,
  type TraceItem,
  traceItemOf,
  type ViewOptions,
} from "./payload.js"

/** An outbox batch as read and opened once per claim, for every destination it goes to. */
interface OpenedBatch {
  readonly items: OutboxItems
  /** Aligned with `items.generations`: each one's payload, its record read from its row; undefined if that row is gone. */
  readonly payloads: ReadonlyArray<DeliveryPayload | undefined>
  /** Aligned with `items.generations`; undefined when no content was kept (or it cannot be opened). */
  readonly contents: ReadonlyArray<DeliveryContent | null> | undefined
  /** The trace items built so far, by the destinations' switches (`optionsKey`), aligned with `items.generations`. */
  readonly traced: Map<string, Array<TraceItem | undefined>>
}

/**
 * What one pass claimed: the batches its rows point to (with the trace items built from them so
 * far), and the OTLP bodies built for the destinations with the same switches and generations.
 */
interface Pass {
  readonly batches: ReadonlyMap<string, OpenedBatch>
  readonly built: Map<string, TraceBatch>
}

/**
 * Opened batches and built bodies outlive a pass: a batch's destinations are often claimed in
 * different passes (one at its limit of sends in flight is left out of a claim), and each would
 * read, open and build the same generations again. Measured with three destinations (the delivery
 * Worker's wall time by phase, bench-broadcast): building bodies was about half of its work.
 * Bounded, the oldest first out: generations held opened, bytes of bodies held.
 */
const OPENED_MAX_GENERATIONS = 5_000
const BUILT_MAX_BYTES = 16 * 1024 * 1024

const generationsIn = (rows: ReadonlyArray<ClaimedRow>) => rows.reduce((n, r) => n + Number(r.generations), 0)

/** Outcome counters by destination kind, for `/metrics`. */
export interface BroadcastStats {
  /** `${kind}\u0000${outcome}` → count; outcomes: delivered, failed (retried), dead, filtered, dropped. */
  readonly outcomes: ReadonlyMap<string, number>
  /** Rows waiting (pending), as last counted. */
  readonly pending: number
  /** Seconds since the oldest pending row was written, as last counted. */
  readonly lagSeconds: number
}

/** The answer of `/test`: the status class and a short reason, never the receiver's body. */
export interface TestResult {
  readonly ok: boolean
  readonly status: number
  readonly message: string
}

/** A send's result: `retryAfterMs` from the receiver's `Retry-After`. */
type SendResult =
  | { readonly ok: true; readonly status: number }
  | { readonly ok: false; readonly status: number; readonly error: string; readonly retryAfterMs?: number }

/** Delivery rows per claim (each one destination's share of a commit batch: up to the ledger's batch of generations). */
const MAX_CLAIM = 200
const MAX_RESPONSE_BYTES = 64 * 1024
const MAINTENANCE_MS = 5_000
/** Consecutive failed sends that open a destination's breaker; it stays open BREAKER_OPEN_MS (doubling, capped). */
const BREAKER_THRESHOLD = 5
const BREAKER_OPEN_MS = 5_000
const BREAKER_MAX_MS = 5 * 60_000
const MAX_BACKOFF_MS = 30 * 60_000

const statusClass = (status: number) =>
  status >= 500 ? "server error" : status === 429 ? "rate limited" : status >= 400 ? "client error" : "unexpected status"

/** `Retry-After` as milliseconds: seconds, or an HTTP date. */
export const retryAfterMs = (value: string | null, now = clockNow()): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** The delay before attempt `attempts + 1`: base, doubling, at least what the receiver asked. */
export const backoffMs = (baseMs: number, attempts: number, retryAfter: number | undefined): number =>
  Math.min(MAX_BACKOFF_MS, Math.max(baseMs * 2 ** Math.max(0, attempts - 1), retryAfter ?? 0))


/** Sends one exporter's requests in order; the first failure ends it. */
export const sendAll = async (
  requests: ReadonlyArray<OutboundRequest>,
  timeoutMs: number,
  allowPrivateAddresses: boolean,
): Promise<SendResult> => {
  let status = 0
  for (const r of requests) {
    try {
      const response = await safeFetch(r.url, r, { allowPrivateAddresses, timeoutMs, maxResponseBytes: MAX_RESPONSE_BYTES })
      status = response.status
      if (status < 200 || status >= 300) {
        const after = retryAfterMs(response.headers.get("retry-after"))
        return {
          ok: false,
          status,
          error: `the receiver answered HTTP ${status} (${statusClass(status)})`,
          ...(after === undefined ? {} : { retryAfterMs: after }),
        }
      }
    } catch (e) {
      const message = e instanceof OutboundError ? e.message : `the request failed (${String(e)})`
      return { ok: false, status: 0, error: message }
    }
  }
  return { ok: true, status }
}

export const optionsOf = (d: ResolvedDestination): ViewOptions => ({
  privacyMode: d.privacy_mode,
  cost: d.broadcast_generation_cost,
  identity: d.broadcast_generation_identity,
  requestContext: d.broadcast_generation_request_context,
})
const optionsKey = (o: ViewOptions) => `${Number(o.privacyMode)}${Number(o.cost)}${Number(o.identity)}${Number(o.requestContext)}`

type Run = <A>(effect: Effect.Effect<A>) => Promise<A>

export interface EngineDeps {
  /** The engine's own client (the Worker's connection). */
  readonly sql: SqlClient.SqlClient
  readonly run: Run
  readonly log: (effect: Effect.Effect<void>) => void
  readonly settings: BroadcastSettings
  readonly allowPrivateAddresses: boolean
  readonly queue: DeliveryQueue
  /** A destination with its secrets in plain text; none once deleted. */
  readonly resolved: (id: string) => Effect.Effect<Option.Option<ResolvedDestination>>
  /** Opens a value sealed with the gateway's secret key. */
  readonly open: (sealed: string) => Either.Either<string, unknown>
  /** Told after the counters changed (the Worker forwards them to the thread that serves /metrics). */
  readonly onCount?: () => void
  /** Told of each lease a claim takes (the Worker's host releases a dead Worker's leases). */
  readonly onLease?: (until: number) => void
}

export type DeliveryEngine = ReturnType<typeof makeDeliveryEngine>

export const makeDeliveryEngine = (deps: EngineDeps) => {
  const { sql, run, log, settings, queue } = deps
  const count = (kind: string, outcome: string, n = 1) => {
  if (n <= 0) return
  const key = `${kind}\u0000${outcome}`
  outcomes.set(key, (outcomes.get(key) ?? 0) + n)
  deps.onCount?.()
  }
  const outcomes = new Map<string, number>()
  let pendingGauge = 0
  let lagGauge = 0

  // ---- helpers over the store ----

  const keyNames = new Map<string, { readonly name: string | null; readonly at: number }>()
  /** The key's name, from a cache of a minute: a hit answers without a promise (it is asked per generation and destination). */
  const keyNameOf = (hash: string, now: number): string | null | Promise<string | null> => {
    const hit = keyNames.get(hash)
    if (hit !== undefined && now - hit.at < 60_000) return hit.name
    return run(sql<{ name: string }>`SELECT name FROM api_keys WHERE hash = ${hash}`.pipe(Effect.orDie)).then((rows) => {
      const name = rows[0]?.name ?? null
      keyNames.set(hash, { name, at: clockNow() })
      return name
    })
  }

  const openContents = (sealed: string | null): ReadonlyArray<DeliveryContent | null> | undefined => {
    if (sealed === null) return undefined
    const plain = deps.open(sealed)
    return Either.isRight(plain) ? contentsOf(JSON.parse(plain.right)) : undefined
  }

  const opened = new Map<string, OpenedBatch>()
  let openedGenerations = 0
  const keepOpened = (id: string, batch: OpenedBatch) => {
    if (opened.has(id)) return
    opened.set(id, batch)
    openedGenerations += batch.items.generations.length
    for (const [oldest, b] of opened) {
      if (openedGenerations <= OPENED_MAX_GENERATIONS) break
      opened.delete(oldest)
      openedGenerations -= b.items.generations.length
    }
  }
  let builtBytes = 0
  const built = new Map<string, TraceBatch>()
  const keepBuilt = (key: string, batch: TraceBatch) => {
    built.set(key, batch)
    builtBytes += batch.otlpJson.byteLength
    for (const [oldest, b] of built) {
      if (builtBytes <= BUILT_MAX_BYTES) break
      built.delete(oldest)
      builtBytes -= b.otlpJson.byteLength
    }
  }

  /** Reads and opens the batches not held opened already, and the records of their generations (one read for the pass). */
  const loadBatches = async (all: ReadonlyArray<string>): Promise<ReadonlyMap<string, OpenedBatch>> => {
    const out = new Map<string, OpenedBatch>()
    const ids: Array<string> = []
    for (const id of all) {
      const hit = opened.get(id)
      if (hit === undefined) ids.push(id)
      else out.set(id, hit)
    }
    if (ids.length === 0) return out
    const rows = await queue.batches(ids)
    const parsed = rows.map((row) => ({ row, items: JSON.parse(row.items) as OutboxItems }))
    const wanted: Array<string> = []
    for (const { items } of parsed) for (const g of items.generations) if (needsRecord(g.payload)) wanted.push(g.payload.id)
    const records = new Map<string, PayloadRow>()
    if (wanted.length > 0) for (const r of await queue.records(wanted)) records.set(String(r.id), r)
    for (const { row, items } of parsed) {
      const payloads = items.generations.map(({ payload }) => {
        if (!needsRecord(payload)) return payload as DeliveryPayload
        const record = records.get(payload.id)
        return record === undefined ? undefined : payloadFrom(record, payload)
      })
      const batch: OpenedBatch = { items, payloads, contents: openContents(row.content), traced: new Map() }
      out.set(row.id, batch)
      keepOpened(row.id, batch)
    }
    return out
  }

  const nowIso = () => new Date().toISOString()

  const markDead = (destinationId: string, batchIds: ReadonlyArray<string>, error: string) =>
    batchIds.length === 0
      ? Promise.resolve()
      : run(
          sql`UPDATE broadcast_deliveries SET state = 'dead', claimed_until = 0, finished_at = ${clockNow()},
            last_error = ${error} WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(batchIds)}`.pipe(Effect.asVoid, Effect.orDie),
        )

  const noteError = (destinationId: string, error: string) =>
    run(
      sql`UPDATE observability_destinations SET last_error = ${error}, last_error_at = ${nowIso()} WHERE id = ${destinationId}`.pipe(
        Effect.asVoid,
        Effect.orDie,
      ),
    )

  /** A failed send: each row retried later, or dead after its last attempt. */
  const markFailed = async (destinationId: string, rows: ReadonlyArray<ClaimedRow>, result: Extract<SendResult, { ok: false }>, kind: string) => {
    const now = clockNow()
    const dead: Array<ClaimedRow> = []
    const retry = new Map<number, Array<ClaimedRow>>()
    for (const row of rows) {
      const attempts = Number(row.attempts) + 1
      if (attempts >= settings.maxAttempts) dead.push(row)
      else {
        const at = now + backoffMs(settings.retryBaseMs, attempts, result.retryAfterMs)
        const group = retry.get(at) ?? []
        group.push(row)
        retry.set(at, group)
      }
    }
    await run(
      Effect.gen(function* () {
        for (const [at, group] of retry) {
          yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, next_attempt_at = ${at}, claimed_until = 0,
            last_error = ${result.error} WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(group.map((r) => r.batch_id))}`
        }
        if (dead.length > 0) {
          yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, state = 'dead', claimed_until = 0,
            finished_at = ${now}, last_error = ${result.error}
            WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(dead.map((r) => r.batch_id))}`
        }
      }).pipe(Effect.orDie),
    )
    count(kind, "failed", generationsIn(rows) - generationsIn(dead))
    count(kind, "dead", generationsIn(dead))
  }

  const release = (destinationId: string, batchIds: ReadonlyArray<string>, at: number) =>
    batchIds.length === 0
      ? Promise.resolve()
      : run(
          sql`UPDATE broadcast_deliveries SET claimed_until = 0, next_attempt_at = ${at}
            WHERE destination_id = ${destinationId} AND batch_id IN ${sql.in(batchIds)}`.pipe(Effect.asVoid, Effect.orDie),
        )

  const forget = (destinationId: string, batchIds: ReadonlyArray<string>) =>
    batchIds.length === 0 ? Promise.resolve() : run(deleteDeliveries(destinationId, batchIds).pipe(Effect.provideService(SqlClient.SqlClient, sql)))

  // ---- per destination: filters, breaker, concurrency ----

  const filters = new Map<string, { readonly version: string; readonly test: ReturnType<typeof compileFilter> }>()
  const filterOf = (d: ResolvedDestination) => {
    const hit = filters.get(d.id)
    if (hit !== undefined && hit.version === d.updated_at) return hit.test
    const test = compileFilter(d.filter_rules)
    filters.set(d.id, { version: d.updated_at, test })
    return test
  }

  interface Breaker {
    failures: number
    openUntil: number
    opens: number
  }
  const breakers = new Map<string, Breaker>()
  const breakerOf = (id: string) => {
    let b = breakers.get(id)
    if (b === undefined) {
      b = { failures: 0, openUntil: 0, opens: 0 }
      breakers.set(id, b)
    }
    return b
  }
  const inFlight = new Map<string, number>()

  /** Destinations not to claim for now: breaker open, or as many sends in flight as allowed. */
  const unavailable = (now: number): Array<string> => {
    const out: Array<string> = []
    for (const [id, b] of breakers) if (b.openUntil > now) out.push(id)
    for (const [id, n] of inFlight) if (n >= settings.concurrencyPerDestination) out.push(id)
    return out
  }

  /**
   * The generations of `rows` as `destination` sees them (sent at most `batch_size`, about `batch_max_bytes`, at a time);
   * rows whose every generation its filter rules refuse are deleted.
   */
  const itemsOf = async (destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>, pass: Pass) => {
    const test = filterOf(destination)
    const options = optionsOf(destination)
    const shape = optionsKey(options)
    const now = clockNow()
    const items: Array<TraceItem> = []
    const kept: Array<ClaimedRow> = []
    const refused: Array<string> = []
    let filtered = 0
    for (const row of rows) {
      const batch = pass.batches.get(row.batch_id)
      const at = batch?.items.destinations.indexOf(destination.id) ?? -1
      let taken = 0
      if (batch !== undefined && at >= 0) {
        const { generations } = batch.items
        let traced = batch.traced.get(shape)
        if (traced === undefined) {
          traced = new Array<TraceItem | undefined>(generations.length)
          batch.traced.set(shape, traced)
        }
        let skip = Number(row.dropped)
        for (let i = 0; i < generations.length; i++) {
          const generation = generations[i]
          if (generation === undefined || !generation.to.includes(at)) continue
          if (skip > 0) {
            skip--
            continue
          }
          const payload = batch.payloads[i]
          // Its record is gone (it is written in the same transaction: not expected); nothing to send.
          if (payload === undefined) continue
          let item = traced[i]
          // The key's name is looked up only to filter or to build: a built item has it.
          if (test !== passAll || item === undefined) {
            const content = options.privacyMode ? undefined : (batch.contents?.[i] ?? undefined)
            const name = keyNameOf(payload.keyHash, now)
            const keyName = name instanceof Promise ? await name : name
            if (test !== passAll && !test(subjectOf(payload, content, keyName))) {
              filtered++
              continue
            }
            item ??= traceItemOf(payload, content, options, keyName)
            traced[i] = item
          }
          items.push(item)
          taken++
        }
      }
      if (taken > 0) kept.push(row)
      else refused.push(row.batch_id)
    }
    await forget(destination.id, refused)
    count(destination.type, "filtered", filtered)
    return { items, kept, options }
  }

  /** The send's bodies, each built once per pass for every destination with the same switches and generations. */
  const batchesOf = (items: ReadonlyArray<TraceItem>, options: ViewOptions, pass: Pass): Array<TraceBatch> => {
    const out: Array<TraceBatch> = []
    for (let i = 0; i < items.length; ) {
      // Up to batch_size generations, under batch_max_bytes (a larger generation goes alone).
      let end = i + 1
      let bytes = (items[i] as TraceItem).bytes
      while (end < items.length && end - i < settings.batchSize && bytes + (items[end] as TraceItem).bytes <= settings.batchMaxBytes) {
        bytes += (items[end] as TraceItem).bytes
        end++
      }
      const chunk = items.slice(i, end)
      i = end
      const key = `${optionsKey(options)}\u0000${chunk.map((item) => item.view.id).join(",")}`
      let batch = pass.built.get(key)
      if (batch === undefined) {
        batch = traceBatch(otlpOf(chunk), chunk.map((item) => item.view))
        keepBuilt(key, batch)
      }
      out.push(batch)
    }
    return out
  }

  /** One send to one destination: filtered, built, sent, and its rows marked. */
  const deliverBatch = async (destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>, timeoutMs: number, pass: Pass) => {
    const kind = destination.type
    const dead = async (reason: string, which: ReadonlyArray<ClaimedRow>) => {
      await markDead(destination.id, which.map((r) => r.batch_id), reason)
      count(kind, "dead", generationsIn(which))
    }
    if (!destination.enabled) return dead("the destination is disabled", rows)
    const exporter = exporterFor(kind)
    if ("unsupported" in exporter) return dead(exporter.unsupported, rows)
    const { items, kept, options } = await itemsOf(destination, rows, pass)
    if (kept.length === 0) return
    const requests: Array<OutboundRequest> = []
    for (const batch of batchesOf(items, options, pass)) {
      const delivery = await exporter.deliver(destination.config, batch)
      if ("unsupported" in delivery) return dead(delivery.unsupported, kept)
      requests.push(...delivery.requests)
    }
    const result = await sendAll(requests, timeoutMs, deps.allowPrivateAddresses)
    const breaker = breakerOf(destination.id)
    if (result.ok) {
      breaker.failures = 0
      breaker.opens = 0
      await queue.delivered(destination.id, kept.map((r) => r.batch_id), clockNow())
      count(kind, "delivered", items.length)
      return
    }
    breaker.failures++
    if (breaker.failures >= BREAKER_THRESHOLD) {
      breaker.openUntil = clockNow() + Math.min(BREAKER_MAX_MS, BREAKER_OPEN_MS * 2 ** breaker.opens)
      breaker.opens++
      breaker.failures = 0
    }
    await noteError(destination.id, result.error)
    await markFailed(destination.id, kept, result, kind)
  }

  // ---- the loop ----

  let stopped = false
  let timer: ReturnType<typeof setTimeout> | undefined
  const running = new Set<Promise<void>>()
  let ticking: Promise<void> | undefined

  /** Sends a destination's claimed rows, up to `batch_size` generations a send, at most `concurrencyPerDestination` at once. */
  const deliverGroup = async (destinationId: string, rows: ReadonlyArray<ClaimedRow>, deadline: number, pass: Pass) => {
    const found = await run(Effect.exit(deps.resolved(destinationId)))
    if (Exit.isFailure(found)) {
      await markDead(destinationId, rows.map((r) => r.batch_id), "the destination's config cannot be read")
      return
    }
    if (Option.isNone(found.value)) {
      // Deleted after these rows were committed: they go too.
      await forget(destinationId, rows.map((r) => r.batch_id))
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
    const worker = async () => {
      for (let send = sends.shift(); send !== undefined; send = sends.shift()) {
        const batchIds = send.map((r) => r.batch_id)
        const left = deadline - clockNow()
        if (left <= 0 || breakerOf(destinationId).openUntil > clockNow()) {
          await release(destinationId, batchIds, Math.max(clockNow(), breakerOf(destinationId).openUntil))
          continue
        }
        inFlight.set(destinationId, (inFlight.get(destinationId) ?? 0) + 1)
        try {
          await deliverBatch(destination, send, Math.min(settings.timeoutMs, left), pass)
        } catch (e) {
          log(Effect.logError(`Broadcast to destination ${destinationId} failed`, String(e)))
          await release(destinationId, batchIds, clockNow() + settings.retryBaseMs).catch(() => undefined)
        } finally {
          inFlight.set(destinationId, (inFlight.get(destinationId) ?? 1) - 1)
        }
      }
    }
    await Promise.all(Array.from({ length: Math.min(settings.concurrencyPerDestination, sends.length) }, worker))
  }

  /** Claims what is due and starts its delivery (the sends run beyond the tick); how many rows it claimed. */
  const tick = async (deadline: number): Promise<number> => {
    const now = clockNow()
    // A read first: an idle queue costs no write (on SQLite an UPDATE takes the write lock even when it changes nothing).
    if (!(await queue.anyDue(now))) return 0
    const until = now + settings.timeoutMs * 2 + 5_000
    deps.onLease?.(until)
    const claimed = await queue.claim(now, until, unavailable(now), MAX_CLAIM)
    if (claimed.length === 0) return 0
    const groups = new Map<string, Array<ClaimedRow>>()
    for (const row of claimed) {
      const group = groups.get(row.destination_id) ?? []
      group.push(row)
      groups.set(row.destination_id, group)
    }
    // Each batch is read and opened once for all its destinations.
    const pass: Pass = { batches: await loadBatches([...new Set(claimed.map((r) => r.batch_id))]), built }
    for (const [id, rows] of groups) {
      const p: Promise<void> = deliverGroup(id, rows, deadline, pass)
        .catch((e: unknown) => {
          log(Effect.logError("Broadcast delivery failed", String(e)))
        })
        .finally(() => running.delete(p))
      running.add(p)
    }
    return claimed.length
  }

  let lastMaintenance = 0
  /** Caps per destination (the oldest pending batches dropped), retention, and the queue gauges. */
  const maintain = async () => {
    const now = clockNow()
    const over = await run(
      sql<{ destination_id: string; n: number; type: string }>`SELECT b.destination_id, SUM(b.generations) AS n, d.type
        FROM broadcast_deliveries b JOIN observability_destinations d ON d.id = b.destination_id
        WHERE b.state = 'pending' GROUP BY b.destination_id, d.type
        HAVING SUM(b.generations) > ${settings.maxPendingPerDestination}`.pipe(Effect.orDie),
    )
    for (const o of over) {
      // The oldest go first: whole rows, then the first generations of the row that straddles the cap.
      let excess = Number(o.n) - settings.maxPendingPerDestination
      while (excess > 0) {
        const oldest = await run(
          sql<{ batch_id: string; generations: number }>`SELECT batch_id, generations FROM broadcast_deliveries
            WHERE destination_id = ${o.destination_id} AND state = 'pending' AND claimed_until < ${now}
            ORDER BY created_at LIMIT 100`.pipe(Effect.orDie),
        )
        if (oldest.length === 0) break
        const whole: Array<string> = []
        let dropped = 0
        for (const row of oldest) {
          if (dropped >= excess) break
          const n = Number(row.generations)
          if (dropped + n <= excess) {
            whole.push(row.batch_id)
            dropped += n
            continue
          }
          const part = excess - dropped
          await run(
            sql`UPDATE broadcast_deliveries SET generations = generations - ${part}, dropped = dropped + ${part}
              WHERE batch_id = ${row.batch_id} AND destination_id = ${o.destination_id}`.pipe(Effect.orDie),
          )
          dropped += part
          break
        }
        await forget(o.destination_id, whole)
        count(o.type, "dropped", dropped)
        excess -= dropped
      }
    }
    // Retention: finished rows go, and with them the batches no row needs any more.
    for (;;) {
      const expired = await run(
        sql<{ batch_id: string }>`SELECT DISTINCT batch_id FROM broadcast_deliveries WHERE state IN ('delivered', 'dead')
          AND finished_at < ${now - settings.retentionMs} LIMIT 500`.pipe(Effect.orDie),
      )
      if (expired.length === 0) break
      const ids = expired.map((r) => r.batch_id)
      await run(
        Effect.all([
          sql`DELETE FROM broadcast_deliveries WHERE batch_id IN ${sql.in(ids)} AND state IN ('delivered', 'dead')
            AND finished_at < ${now - settings.retentionMs}`,
          sql`DELETE FROM broadcast_contents WHERE batch_id IN ${sql.in(ids)}
            AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_contents.batch_id)`,
          sql`DELETE FROM broadcast_batches WHERE id IN ${sql.in(ids)}
            AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_batches.id)`,
        ]).pipe(Effect.orDie),
      )
      if (expired.length < 500) break
    }
    const depth = await run(
      sql<{ n: number | null; oldest: number | null }>`SELECT SUM(generations) AS n, MIN(created_at) AS oldest FROM broadcast_deliveries
        WHERE state = 'pending'`.pipe(Effect.orDie),
    )
    pendingGauge = Number(depth[0]?.n ?? 0)
    const oldest = depth[0]?.oldest
    lagGauge = oldest === null || oldest === undefined ? 0 : Math.max(0, (now - Number(oldest)) / 1000)
  deps.onCount?.()
  }

  // One maintenance at a time: two at once (the loop's and the API's `maintain`) would each drop
  // the same excess over a destination's cap. A second caller waits for the first, then runs.
  let maintenance: Promise<void> = Promise.resolve()
  const maintainAlone = (): Promise<void> => {
    const next = maintenance.then(maintain, maintain)
    maintenance = next
    return next
  }

  const loop = () => {
    timer = undefined
    if (stopped) return
    let claimed = 0
    ticking = (async () => {
      try {
        claimed = await tick(clockNow() + settings.timeoutMs)
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
      await tick(deadline)
      while (running.size > 0 && clockNow() < deadline) {
        await Promise.race([Promise.all([...running]), new Promise((r) => setTimeout(r, Math.max(0, deadline - clockNow())))])
      }
    } catch (e) {
      log(Effect.logError("The broadcast worker's last pass failed", String(e)))
    }
  }

  const stats = (): BroadcastStats => ({ outcomes, pending: pendingGauge, lagSeconds: lagGauge })

  return {
    start,
    finish,
    stats,
    maintain: maintainAlone,
    /** A redelivery: the destination's breaker starts closed. */
    resetBreaker: (id: string) => {
      breakers.delete(id)
    },
  } as const
}
