/**
 * Broadcast (docs/broadcast.md): the outbox hook on the ledger writer (src/broadcast/outbox.ts),
 * the delivery engine (src/broadcast/engine.ts) and the API's test sends and redeliveries. The
 * engine runs in the delivery Worker (src/broadcast/worker-host.ts), off the thread that serves
 * requests: this thread pays only for the outbox rows in the ledger's commit. An in-memory
 * database (which another thread cannot open) keeps it on this thread, on a timer.
 */
import { SqlClient } from "@effect/sql"
import { type Context, Effect, Option, Redacted, Runtime, type Scope } from "effect"
import { GatewayConfig, type Settings } from "../config/Config.js"
import { DestinationKinds } from "../domain/destinations.js"
import { BadRequest, NotFound } from "../domain/errors.js"
import { Destinations } from "../services/Destinations.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { LedgerHooks } from "../services/LedgerHooks.js"
import { Secrets } from "../services/secrets.js"
import { MainConnection } from "../store/sqlite-client.js"
import { traceBatch } from "./exporter.js"
import { exporterFor } from "./exporters/index.js"
import { sqlDeliveryQueue } from "./deliveries.js"
import { type BroadcastStats, makeDeliveryEngine, optionsOf, sendAll, type TestResult } from "./engine.js"
import { makeOutbox } from "./outbox.js"
import { requeueDead } from "./queue.js"
import { otlpOf, traceItemOf } from "./payload.js"
import { anyDestination, loadTargets, rowsWaiting } from "./targets.js"
import { testGeneration } from "./test-send.js"
import { type DeliveryHost, lazyHost, startDeliveryHost } from "./worker-host.js"
import { clipped } from "../domain/validation.js"

export { backoffMs, type BroadcastStats, retryAfterMs, type TestResult } from "./engine.js"

/** What the parts of the service share, made once with its layer. */
interface Parts {
  readonly sql: SqlClient.SqlClient
  readonly config: Settings
  readonly destinations: Destinations
  readonly secrets: Secrets
  readonly kinds: Context.Tag.Service<DestinationKinds>
  readonly run: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly log: (effect: Effect.Effect<void>) => void
}

/** The delivery side as the service drives it: the Worker's host (started by `ensure`), or the engine on this thread. */
type Delivery = Omit<DeliveryHost, "kill" | "starts"> & Partial<Pick<DeliveryHost, "kill" | "starts">> & { readonly ensure?: () => void }

/**
 * The delivery Worker, started when first needed; on this thread, on a timer, for an in-memory
 * database (which another thread cannot open) or when `broadcast.in_thread` asks for it.
 */
const deliveryOf = (parts: Parts, main: Context.Tag.Service<MainConnection>): Delivery => {
  const { sql, config, run, log } = parts
  const settings = config.broadcast
  if (config.databaseUrl === ":memory:" || settings.inThread === true) {
    const engine = makeDeliveryEngine({
      sql,
      run,
      log,
      settings,
      allowPrivateAddresses: config.allowPrivateAddresses,
      queue: sqlDeliveryQueue(sql, run),
      kinds: parts.kinds,
      resolved: parts.destinations.resolved,
      open: parts.secrets.open,
    })
    engine.start()
    return { stats: engine.stats, maintain: engine.maintain, resetBreaker: engine.resetBreaker, finish: engine.finish }
  }
  return lazyHost(() =>
    startDeliveryHost(
      {
        databaseUrl: config.databaseUrl,
        pgPoolSize: config.pgPoolSize,
        secretKey: Option.match(config.secretKey, { onNone: () => null, onSome: Redacted.value }),
        dataDir: config.dataDir,
        allowPrivateAddresses: config.allowPrivateAddresses,
        broadcast: settings,
        logLevel: config.logLevel,
        gate: main.gate ?? null,
      },
      (message) => log(Effect.logError(message)),
    ),
  )
}

/**
 * The commit side: the outbox hook in the ledger's commit (src/broadcast/outbox.ts), whose cached
 * targets a destination's change clears. A commit that adds delivery rows, or a destination made
 * while no Worker has started, starts it. Both are removed when the scope closes.
 */
const hookOutbox = (parts: Parts, hooks: LedgerHooks, delivery: Delivery): Effect.Effect<void, never, Scope.Scope> => {
  const { sql, run } = parts
  const outbox = makeOutbox({ load: (ids) => run(loadTargets(sql, ids)), seal: parts.secrets.seal })
  const ensureWorker = () => delivery.ensure?.()
  const unregister = hooks.register((entries) => {
    const rows = outbox.hook(entries)
    if (rows instanceof Promise) {
      return rows.then((r) => {
        if (r.length > 0) ensureWorker()
        return r
      })
    }
    if (rows.length > 0) ensureWorker()
    return rows
  })
  const unlisten = parts.destinations.onChange((workspaceId) => {
    outbox.invalidate(workspaceId)
    // A destination made (here or in another process): the Worker may have work from now on.
    if (delivery.ensure !== undefined && delivery.starts?.() === 0) {
      run(anyDestination(sql)).then(
        (any) => (any ? ensureWorker() : undefined),
        () => ensureWorker(),
      )
    }
  })
  return Effect.addFinalizer(() =>
    Effect.sync(() => {
      unregister()
      unlisten()
    }),
  )
}

/**
 * The Worker starts once there may be something to deliver: a destination (at start, or made
 * later), rows left from an earlier run, or the first batch the outbox adds rows for. A gateway
 * that broadcasts nothing never pays its heap (~67 MB) and its start (~1.2 s of CPU from source).
 */
const startIfDue = (sql: SqlClient.SqlClient, delivery: Delivery): Effect.Effect<void> =>
  Effect.gen(function* () {
    if (delivery.ensure === undefined) return
    const start = yield* Effect.all([anyDestination(sql), rowsWaiting(sql)]).pipe(
      Effect.map(([made, waiting]) => made || waiting),
      Effect.orElseSucceed(() => true),
    )
    if (start) delivery.ensure()
  })

/** At shutdown: the ledger's last rows are committed first, then what is due is sent within the grace. */
const lastPass = (parts: Parts, generations: GenerationStore, delivery: Delivery): Effect.Effect<void, never, Scope.Scope> =>
  Effect.addFinalizer(() =>
    Effect.promise(async () => {
      const deadline = Date.now() + Math.min(parts.config.shutdownGraceMs, parts.config.broadcast.timeoutMs)
      try {
        await parts.run(generations.flush)
      } catch (e) {
        parts.log(Effect.logError("The ledger's last commit before the broadcast's last pass failed", String(e)))
      }
      await delivery.finish(deadline)
    }),
  )

/** Sends a made-up generation (src/broadcast/test-send.ts) to the destination now. */
const sendTest = (parts: Parts, userId: string, id: string) =>
  Effect.gen(function* () {
    const { destinations, config } = parts
    yield* destinations.requireAdministered(userId, id)
    const destination = Option.getOrThrow(yield* destinations.resolved(id))
    const exporter = exporterFor(parts.kinds, destination.type)
    if ("unsupported" in exporter) return yield* new BadRequest({ message: `Invalid request: ${exporter.unsupported}` })
    const { payload, content } = testGeneration(userId, destination.workspace_id, Date.now())
    const item = traceItemOf(payload, content, optionsOf(destination), null)
    // A kind (or a config) the exporter cannot deliver to is the caller's to fix: 400, as above.
    const delivery = yield* Effect.promise(() => exporter.deliver(destination.config, traceBatch(otlpOf([item]), [item.view])))
    if ("unsupported" in delivery) return yield* new BadRequest({ message: `Invalid request: ${delivery.unsupported}` })
    return yield* Effect.promise(async (): Promise<TestResult> => {
      const sent = await sendAll(delivery.requests, config.broadcast.timeoutMs, config.allowPrivateAddresses)
      return sent.ok
        ? { ok: true, status: sent.status, message: `delivered (HTTP ${sent.status})` }
        : { ok: false, status: sent.status, message: sent.error }
    })
  })

/** Puts a destination's dead deliveries back in the queue, its breaker closed; how many. Any destination (the operator's CLI). */
const redeliverAny = ({ sql }: Parts, delivery: Delivery, id: string) =>
  Effect.gen(function* () {
    const found = yield* sql<{ id: string }>`SELECT id FROM observability_destinations WHERE id = ${id}`.pipe(Effect.orDie)
    if (found.length === 0) return yield* new NotFound({ message: `Observability destination ${clipped(id)} not found` })
    const requeued = yield* Effect.provideService(requeueDead(id), SqlClient.SqlClient, sql)
    delivery.resetBreaker(id)
    return requeued
  })

export class Broadcast extends Effect.Service<Broadcast>()("Broadcast", {
  scoped: Effect.gen(function* () {
    const runtime = yield* Effect.runtime<never>()
    const parts: Parts = {
      sql: yield* SqlClient.SqlClient,
      config: yield* GatewayConfig,
      destinations: yield* Destinations,
      secrets: yield* Secrets,
      kinds: yield* DestinationKinds,
      run: Runtime.runPromise(runtime),
      log: (effect) => Runtime.runFork(runtime)(effect),
    }
    const delivery = deliveryOf(parts, yield* MainConnection)
    yield* hookOutbox(parts, yield* LedgerHooks, delivery)
    yield* startIfDue(parts.sql, delivery)
    yield* lastPass(parts, yield* GenerationStore, delivery)

    return {
      test: (userId: string, id: string) => sendTest(parts, userId, id),
      /** Puts a destination's dead deliveries back in the queue; how many. */
      redeliver: (userId: string, id: string) =>
        Effect.gen(function* () {
          yield* parts.destinations.requireAdministered(userId, id)
          return yield* redeliverAny(parts, delivery, id)
        }),
      /** `redeliver` for the operator (CLI): any destination. */
      redeliverAny: (id: string) => redeliverAny(parts, delivery, id),
      stats: (): BroadcastStats => delivery.stats(),
      /** Runs the worker's maintenance now (tests: caps and retention without waiting). */
      maintainNow: Effect.promise(() => delivery.maintain()),
      /** The delivery Worker: ended as a crash would (tests), and how many have started; undefined on this thread. */
      killWorker: () => delivery.kill?.(),
      workerStarts: () => delivery.starts?.() ?? 0,
      /** A workspace's broadcast switch changed: its targets are read again here and, by notice, in the other processes. */
      invalidate: (workspaceId: string) => parts.destinations.changed(workspaceId),
    } as const
  }),
  dependencies: [Destinations.Default, Secrets.Default, GenerationStore.Default, LedgerHooks.Default],
}) {}
