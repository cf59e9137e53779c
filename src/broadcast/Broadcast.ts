/**
 * Broadcast (issue 25 §1): the outbox hook on the ledger writer (src/broadcast/outbox.ts), and
 * the delivery worker every process runs. The worker claims due rows with a lease (`UPDATE …
 * SET claimed_until … RETURNING`, no lock held while it sends), groups them per destination in
 * batches of `broadcast.batch_size`, applies the destination's filter rules, builds one OTLP
 * trace request per batch (src/broadcast/payload.ts) and the kind's requests (the exporter
 * registry), and sends them through the safe outbound fetcher. A failure is retried with
 * backoff (the first within `retry_base_ms`, doubling, `Retry-After` honoured) up to
 * `max_attempts`, then the row is dead with its last error. Delivery is at least once: a
 * redelivery carries the same trace and span ids. Per destination: a cap on pending rows (the
 * oldest dropped, counted), a limit of requests in flight, and a circuit breaker. Delivered and
 * dead rows are deleted after the retention. Plain async code on a timer: nothing here runs on
 * a request's path.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Either, Exit, Option, Runtime } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { BadRequest, NotFound } from "../domain/errors.js"
import { Destinations, type ResolvedDestination } from "../services/Destinations.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { LedgerHooks } from "../services/LedgerHooks.js"
import { Secrets } from "../services/secrets.js"
import { OutboundError, safeFetch } from "../outbound/fetch.js"
import type { OutboundRequest } from "./exporter.js"
import { exporterFor } from "./exporters/index.js"
import { compileFilter } from "./filters.js"
import { makeOutbox, type WorkspaceTargets } from "./outbox.js"
import { requeueDead } from "./queue.js"
import {
  type DeliveryContent,
  type DeliveryPayload,
  otlpOf,
  subjectOf,
  type TraceItem,
  traceItemOf,
  type ViewOptions,
} from "./payload.js"

interface ClaimedRow {
  readonly id: string
  readonly destination_id: string
  readonly generation_id: string
  readonly payload: string
  readonly content: string | null
  readonly attempts: number
  readonly created_at: number
}

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

const MAX_CLAIM = 500
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
export const retryAfterMs = (value: string | null, now = Date.now()): number | undefined => {
  if (value === null) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = Date.parse(trimmed)
  return Number.isNaN(at) ? undefined : Math.max(0, at - now)
}

/** The delay before attempt `attempts + 1`: base, doubling, at least what the receiver asked. */
export const backoffMs = (baseMs: number, attempts: number, retryAfter: number | undefined): number =>
  Math.min(MAX_BACKOFF_MS, Math.max(baseMs * 2 ** Math.max(0, attempts - 1), retryAfter ?? 0))

export class Broadcast extends Effect.Service<Broadcast>()("Broadcast", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GatewayConfig
    const destinations = yield* Destinations
    const secrets = yield* Secrets
    const hooks = yield* LedgerHooks
    const generations = yield* GenerationStore
    const runtime = yield* Effect.runtime<never>()
    const run = Runtime.runPromise(runtime)
    const log = (effect: Effect.Effect<void>) => Runtime.runFork(runtime)(effect)
    const settings = config.broadcast
    const isPg = sql.onDialectOrElse({ pg: () => true, orElse: () => false })

    // ---- the commit side ----

    const loadTargets = (workspaceIds: ReadonlyArray<string>) =>
      Effect.gen(function* () {
        const flags = yield* sql<{ id: string; enabled: number }>`SELECT id, is_observability_broadcast_enabled AS enabled
          FROM workspaces WHERE id IN ${sql.in(workspaceIds)}`
        const rows = yield* sql<{
          id: string
          workspace_id: string
          privacy_mode: number
          sampling_rate: number
          api_key_hashes: string | null
        }>`SELECT id, workspace_id, privacy_mode, sampling_rate, api_key_hashes FROM observability_destinations
          WHERE enabled = 1 AND workspace_id IN ${sql.in(workspaceIds)}`
        const out = new Map<string, WorkspaceTargets>()
        for (const ws of workspaceIds) {
          const flag = flags.find((f) => f.id === ws)
          out.set(ws, {
            enabled: flag !== undefined && Number(flag.enabled) === 1,
            destinations: rows
              .filter((r) => r.workspace_id === ws)
              .map((r) => ({
                id: r.id,
                privacyMode: Number(r.privacy_mode) === 1,
                samplingRate: Number(r.sampling_rate),
                keyHashes: r.api_key_hashes === null ? null : new Set(JSON.parse(r.api_key_hashes) as Array<string>),
              })),
          })
        }
        return out as ReadonlyMap<string, WorkspaceTargets>
      }).pipe(Effect.orDie)

    const outbox = makeOutbox({ load: (ids) => run(loadTargets(ids)), seal: secrets.seal })
    const unregister = hooks.register(outbox.hook)
    const unlisten = destinations.onChange((workspaceId) => outbox.invalidate(workspaceId))
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unregister()
        unlisten()
      }),
    )

    // ---- counters ----

    const outcomes = new Map<string, number>()
    const count = (kind: string, outcome: string, n = 1) => {
      if (n <= 0) return
      const key = `${kind}\u0000${outcome}`
      outcomes.set(key, (outcomes.get(key) ?? 0) + n)
    }
    let pendingGauge = 0
    let lagGauge = 0

    // ---- helpers over the store ----

    const keyNames = new Map<string, { readonly name: string | null; readonly at: number }>()
    const keyNameOf = async (hash: string): Promise<string | null> => {
      const hit = keyNames.get(hash)
      if (hit !== undefined && Date.now() - hit.at < 60_000) return hit.name
      const rows = await run(sql<{ name: string }>`SELECT name FROM api_keys WHERE hash = ${hash}`.pipe(Effect.orDie))
      const name = rows[0]?.name ?? null
      keyNames.set(hash, { name, at: Date.now() })
      return name
    }

    const openContent = (sealed: string | null): DeliveryContent | undefined => {
      if (sealed === null) return undefined
      const plain = secrets.open(sealed)
      return Either.isRight(plain) ? (JSON.parse(plain.right) as DeliveryContent) : undefined
    }

    const optionsOf = (d: ResolvedDestination): ViewOptions => ({
      privacyMode: d.privacy_mode,
      cost: d.broadcast_generation_cost,
      identity: d.broadcast_generation_identity,
      requestContext: d.broadcast_generation_request_context,
    })

    /** Sends one exporter's requests in order; the first failure ends it. */
    const sendAll = async (requests: ReadonlyArray<OutboundRequest>, timeoutMs: number): Promise<SendResult> => {
      let status = 0
      for (const r of requests) {
        try {
          const response = await safeFetch(r.url, r, {
            allowPrivateAddresses: config.allowPrivateAddresses,
            timeoutMs,
            maxResponseBytes: MAX_RESPONSE_BYTES,
          })
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

    const nowIso = () => new Date().toISOString()

    const markDelivered = (ids: ReadonlyArray<string>, destinationId: string) =>
      run(
        Effect.gen(function* () {
          const now = Date.now()
          yield* sql`UPDATE broadcast_deliveries SET state = 'delivered', content = NULL, claimed_until = 0,
            finished_at = ${now}, last_error = NULL WHERE id IN ${sql.in(ids)}`
          yield* sql`UPDATE observability_destinations SET last_success_at = ${nowIso()} WHERE id = ${destinationId}`
        }).pipe(Effect.orDie),
      )

    const markDead = (ids: ReadonlyArray<string>, error: string) =>
      ids.length === 0
        ? Promise.resolve()
        : run(
            sql`UPDATE broadcast_deliveries SET state = 'dead', claimed_until = 0, finished_at = ${Date.now()},
              last_error = ${error} WHERE id IN ${sql.in(ids)}`.pipe(Effect.asVoid, Effect.orDie),
          )

    const noteError = (destinationId: string, error: string) =>
      run(
        sql`UPDATE observability_destinations SET last_error = ${error}, last_error_at = ${nowIso()} WHERE id = ${destinationId}`.pipe(
          Effect.asVoid,
          Effect.orDie,
        ),
      )

    /** A failed send: each row retried later, or dead after its last attempt. */
    const markFailed = async (rows: ReadonlyArray<ClaimedRow>, result: Extract<SendResult, { ok: false }>, kind: string) => {
      const now = Date.now()
      const dead: Array<string> = []
      const retry = new Map<number, Array<string>>()
      for (const row of rows) {
        const attempts = Number(row.attempts) + 1
        if (attempts >= settings.maxAttempts) dead.push(row.id)
        else {
          const at = now + backoffMs(settings.retryBaseMs, attempts, result.retryAfterMs)
          const ids = retry.get(at) ?? []
          ids.push(row.id)
          retry.set(at, ids)
        }
      }
      await run(
        Effect.gen(function* () {
          for (const [at, ids] of retry) {
            yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, next_attempt_at = ${at}, claimed_until = 0,
              last_error = ${result.error} WHERE id IN ${sql.in(ids)}`
          }
          if (dead.length > 0) {
            yield* sql`UPDATE broadcast_deliveries SET attempts = attempts + 1, state = 'dead', claimed_until = 0,
              finished_at = ${now}, last_error = ${result.error} WHERE id IN ${sql.in(dead)}`
          }
        }).pipe(Effect.orDie),
      )
      count(kind, "failed", rows.length - dead.length)
      count(kind, "dead", dead.length)
    }

    const release = (ids: ReadonlyArray<string>, at: number) =>
      ids.length === 0
        ? Promise.resolve()
        : run(
            sql`UPDATE broadcast_deliveries SET claimed_until = 0, next_attempt_at = ${at} WHERE id IN ${sql.in(ids)}`.pipe(
              Effect.asVoid,
              Effect.orDie,
            ),
          )

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

    /** The generations of a batch as `destination` sees them; rows its filter rules refuse are deleted. */
    const itemsOf = async (destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>) => {
      const test = filterOf(destination)
      const options = optionsOf(destination)
      const items: Array<TraceItem> = []
      const kept: Array<ClaimedRow> = []
      const refused: Array<string> = []
      for (const row of rows) {
        const payload = JSON.parse(row.payload) as DeliveryPayload
        const content = openContent(row.content)
        const keyName = await keyNameOf(payload.keyHash)
        if (!test(subjectOf(payload, content, keyName))) {
          refused.push(row.id)
          continue
        }
        items.push(traceItemOf(payload, content, options, keyName))
        kept.push(row)
      }
      if (refused.length > 0) {
        await run(sql`DELETE FROM broadcast_deliveries WHERE id IN ${sql.in(refused)}`.pipe(Effect.asVoid, Effect.orDie))
        count(destination.type, "filtered", refused.length)
      }
      return { items, kept }
    }

    /** One batch to one destination: filtered, built, sent, and its rows marked. */
    const deliverBatch = async (destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>, timeoutMs: number) => {
      const kind = destination.type
      if (!destination.enabled) {
        await markDead(rows.map((r) => r.id), "the destination is disabled")
        count(kind, "dead", rows.length)
        return
      }
      const exporter = exporterFor(kind)
      if ("unsupported" in exporter) {
        await markDead(rows.map((r) => r.id), exporter.unsupported)
        count(kind, "dead", rows.length)
        return
      }
      const { items, kept } = await itemsOf(destination, rows)
      if (kept.length === 0) return
      const otlp = otlpOf(items)
      const delivery = await exporter.deliver(destination.config, { otlp: otlp.json, generations: items.map((i) => i.view) })
      if ("unsupported" in delivery) {
        await markDead(kept.map((r) => r.id), delivery.unsupported)
        count(kind, "dead", kept.length)
        return
      }
      const result = await sendAll(delivery.requests, timeoutMs)
      const breaker = breakerOf(destination.id)
      if (result.ok) {
        breaker.failures = 0
        breaker.opens = 0
        await markDelivered(kept.map((r) => r.id), destination.id)
        count(kind, "delivered", kept.length)
        return
      }
      breaker.failures++
      if (breaker.failures >= BREAKER_THRESHOLD) {
        breaker.openUntil = Date.now() + Math.min(BREAKER_MAX_MS, BREAKER_OPEN_MS * 2 ** breaker.opens)
        breaker.opens++
        breaker.failures = 0
      }
      await noteError(destination.id, result.error)
      await markFailed(kept, result, kind)
    }

    // ---- the loop ----

    let stopped = false
    let timer: ReturnType<typeof setTimeout> | undefined
    const running = new Set<Promise<void>>()
    let ticking: Promise<void> | undefined

    const claim = (now: number, excluded: ReadonlyArray<string>) => {
      const until = now + settings.timeoutMs * 2 + 5_000
      const skip = excluded.length === 0 ? sql`` : sql`AND destination_id NOT IN ${sql.in(excluded)}`
      const due = isPg
        ? sql`SELECT id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
            AND claimed_until < ${now} ${skip} ORDER BY next_attempt_at LIMIT ${MAX_CLAIM} FOR UPDATE SKIP LOCKED`
        : sql`SELECT id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
            AND claimed_until < ${now} ${skip} ORDER BY next_attempt_at LIMIT ${MAX_CLAIM}`
      return run(
        sql<ClaimedRow>`UPDATE broadcast_deliveries SET claimed_until = ${until}
          WHERE id IN (${due}) AND state = 'pending' AND claimed_until < ${now}
          RETURNING id, destination_id, generation_id, payload, content, attempts, created_at`.pipe(Effect.orDie),
      )
    }

    /** Sends a destination's claimed rows in batches, at most `concurrencyPerDestination` at once. */
    const deliverGroup = async (destinationId: string, rows: ReadonlyArray<ClaimedRow>, deadline: number) => {
      const found = await run(Effect.exit(destinations.resolved(destinationId)))
      if (Exit.isFailure(found)) {
        await markDead(rows.map((r) => r.id), "the destination's config cannot be read")
        return
      }
      if (Option.isNone(found.value)) {
        // Deleted after these rows were committed: they go too.
        await run(sql`DELETE FROM broadcast_deliveries WHERE id IN ${sql.in(rows.map((r) => r.id))}`.pipe(Effect.asVoid, Effect.orDie))
        return
      }
      const destination = found.value.value
      const sorted = [...rows].sort((a, b) => Number(a.created_at) - Number(b.created_at))
      const batches: Array<Array<ClaimedRow>> = []
      for (let i = 0; i < sorted.length; i += settings.batchSize) batches.push(sorted.slice(i, i + settings.batchSize))
      const worker = async () => {
        for (let batch = batches.shift(); batch !== undefined; batch = batches.shift()) {
          const left = deadline - Date.now()
          if (left <= 0 || breakerOf(destinationId).openUntil > Date.now()) {
            await release(batch.map((r) => r.id), Math.max(Date.now(), breakerOf(destinationId).openUntil))
            continue
          }
          inFlight.set(destinationId, (inFlight.get(destinationId) ?? 0) + 1)
          try {
            await deliverBatch(destination, batch, Math.min(settings.timeoutMs, left))
          } catch (e) {
            log(Effect.logError(`Broadcast to destination ${destinationId} failed`, String(e)))
            await release(batch.map((r) => r.id), Date.now() + settings.retryBaseMs).catch(() => undefined)
          } finally {
            inFlight.set(destinationId, (inFlight.get(destinationId) ?? 1) - 1)
          }
        }
      }
      await Promise.all(Array.from({ length: Math.min(settings.concurrencyPerDestination, batches.length) }, worker))
    }

    /** Claims what is due and starts its delivery; the sends run beyond the tick. */
    const tick = async (deadline: number) => {
      const now = Date.now()
      // A read first: an idle queue costs no write (on SQLite an UPDATE takes the write lock even when it changes nothing).
      const due = await run(
        sql<{ id: string }>`SELECT id FROM broadcast_deliveries WHERE state = 'pending' AND next_attempt_at <= ${now}
          AND claimed_until < ${now} LIMIT 1`.pipe(Effect.orDie),
      )
      if (due.length === 0) return
      const claimed = await claim(now, unavailable(now))
      if (claimed.length === 0) return
      const groups = new Map<string, Array<ClaimedRow>>()
      for (const row of claimed) {
        const group = groups.get(row.destination_id) ?? []
        group.push(row)
        groups.set(row.destination_id, group)
      }
      for (const [id, rows] of groups) {
        const p: Promise<void> = deliverGroup(id, rows, deadline)
          .catch((e: unknown) => {
            log(Effect.logError("Broadcast delivery failed", String(e)))
          })
          .finally(() => running.delete(p))
        running.add(p)
      }
    }

    let lastMaintenance = 0
    /** Caps per destination (the oldest pending dropped), retention, and the queue gauges. */
    const maintain = async () => {
      const now = Date.now()
      const over = await run(
        sql<{ destination_id: string; n: number; type: string }>`SELECT b.destination_id, COUNT(*) AS n, d.type
          FROM broadcast_deliveries b JOIN observability_destinations d ON d.id = b.destination_id
          WHERE b.state = 'pending' GROUP BY b.destination_id, d.type
          HAVING COUNT(*) > ${settings.maxPendingPerDestination}`.pipe(Effect.orDie),
      )
      for (const o of over) {
        const excess = Number(o.n) - settings.maxPendingPerDestination
        await run(
          sql`DELETE FROM broadcast_deliveries WHERE id IN (SELECT id FROM broadcast_deliveries
            WHERE destination_id = ${o.destination_id} AND state = 'pending' AND claimed_until < ${now}
            ORDER BY created_at LIMIT ${excess})`.pipe(Effect.orDie),
        )
        count(o.type, "dropped", excess)
      }
      await run(
        sql`DELETE FROM broadcast_deliveries WHERE state IN ('delivered', 'dead') AND finished_at < ${now - settings.retentionMs}`.pipe(
          Effect.orDie,
        ),
      )
      const depth = await run(
        sql<{ n: number; oldest: number | null }>`SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM broadcast_deliveries
          WHERE state = 'pending'`.pipe(Effect.orDie),
      )
      pendingGauge = Number(depth[0]?.n ?? 0)
      const oldest = depth[0]?.oldest
      lagGauge = oldest === null || oldest === undefined ? 0 : Math.max(0, (now - Number(oldest)) / 1000)
    }

    const loop = () => {
      timer = undefined
      if (stopped) return
      ticking = (async () => {
        try {
          await tick(Date.now() + settings.timeoutMs)
          if (Date.now() - lastMaintenance >= MAINTENANCE_MS) {
            lastMaintenance = Date.now()
            await maintain()
          }
        } catch (e) {
          log(Effect.logError("The broadcast worker's pass failed", String(e)))
        }
      })().finally(() => {
        ticking = undefined
        if (!stopped) timer = setTimeout(loop, settings.pollMs)
      })
    }
    timer = setTimeout(loop, 0)

    // At shutdown: the ledger's last rows are committed first, then what is due is sent within the grace.
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        stopped = true
        if (timer !== undefined) clearTimeout(timer)
        await ticking
        const deadline = Date.now() + Math.min(config.shutdownGraceMs, settings.timeoutMs)
        try {
          await run(generations.flush)
          await tick(deadline)
          while (running.size > 0 && Date.now() < deadline) {
            await Promise.race([Promise.all([...running]), new Promise((r) => setTimeout(r, Math.max(0, deadline - Date.now())))])
          }
        } catch (e) {
          log(Effect.logError("The broadcast worker's last pass failed", String(e)))
        }
      }),
    )

    // ---- for the API and the CLI ----

    /** Sends a made-up generation to the destination now. */
    const test = (userId: string, id: string) =>
      Effect.gen(function* () {
        yield* destinations.get(userId, id)
        const destination = Option.getOrThrow(yield* destinations.resolved(id))
        const exporter = exporterFor(destination.type)
        if ("unsupported" in exporter) return yield* new BadRequest({ message: `Invalid request: ${exporter.unsupported}` })
        const now = Date.now()
        const testId = `gen-test-${Math.floor(now / 1000)}-${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`
        const payload: DeliveryPayload = {
          id: testId,
          keyHash: "0".repeat(64),
          ownerId: userId,
          workspaceId: destination.workspace_id,
          model: "gateway/test",
          provider: "gateway",
          upstreamModel: "test",
          createdAt: new Date(now).toISOString(),
          generationTimeMs: 1,
          latencyMs: 1,
          streamed: false,
          status: "completed",
          finishReason: "stop",
          sessionId: null,
          user: null,
          inputTokens: 1,
          cachedTokens: 0,
          cacheWriteTokens: 0,
          outputTokens: 1,
          reasoningTokens: 0,
          totalCost: 0,
          isByok: false,
          error: null,
          trace: { trace_name: "gateway destination test" },
          attempts: [],
          params: {},
          strategy: null,
          plugins: [],
          pricing: null,
        }
        const content: DeliveryContent = { input: [{ role: "user", content: "ping" }], output: "pong", reasoning: null }
        const item = traceItemOf(payload, content, optionsOf(destination), null)
        // A kind (or a config) the exporter cannot deliver to is the caller's to fix: 400, as above.
        const delivery = yield* Effect.promise(() => exporter.deliver(destination.config, { otlp: otlpOf([item]).json, generations: [item.view] }))
        if ("unsupported" in delivery) return yield* new BadRequest({ message: `Invalid request: ${delivery.unsupported}` })
        return yield* Effect.promise(async (): Promise<TestResult> => {
          const sent = await sendAll(delivery.requests, settings.timeoutMs)
          return sent.ok
            ? { ok: true, status: sent.status, message: `delivered (HTTP ${sent.status})` }
            : { ok: false, status: sent.status, message: sent.error }
        })
      })

    /** Puts a destination's dead deliveries back in the queue; how many. */
    const redeliver = (userId: string, id: string) =>
      Effect.gen(function* () {
        yield* destinations.get(userId, id)
        return yield* redeliverAny(id)
      })

    /** `redeliver` for the operator (CLI): any destination. */
    const redeliverAny = (id: string) =>
      Effect.gen(function* () {
        const found = yield* sql<{ id: string }>`SELECT id FROM observability_destinations WHERE id = ${id}`.pipe(Effect.orDie)
        if (found.length === 0) return yield* new NotFound({ message: `Observability destination ${id} not found` })
        const requeued = yield* Effect.provideService(requeueDead(id), SqlClient.SqlClient, sql)
        breakers.delete(id)
        return requeued
      })

    const stats = (): BroadcastStats => ({ outcomes, pending: pendingGauge, lagSeconds: lagGauge })

    /** Runs the worker's maintenance now (tests: caps and retention without waiting). */
    const maintainNow = Effect.promise(maintain)

    return {
      test,
      redeliver,
      redeliverAny,
      stats,
      maintainNow,
      invalidate: (workspaceId: string) => Effect.sync(() => outbox.invalidate(workspaceId)),
    } as const
  }),
  dependencies: [Destinations.Default, Secrets.Default, GenerationStore.Default, LedgerHooks.Default],
}) {}
