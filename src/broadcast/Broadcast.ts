/**
 * Broadcast (docs/broadcast.md): the outbox hook on the ledger writer (src/broadcast/outbox.ts),
 * the delivery engine (src/broadcast/engine.ts) and the API's test sends and redeliveries. The
 * engine runs in the delivery Worker (src/broadcast/worker-host.ts), off the thread that serves
 * requests: this thread pays only for the outbox rows in the ledger's commit. An in-memory
 * database (which another thread cannot open) keeps it on this thread, on a timer.
 */
import { SqlClient } from "@effect/sql"
import { Effect, Option, Redacted, Runtime } from "effect"
import { GatewayConfig } from "../config/Config.js"
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
import { makeOutbox, type WorkspaceTargets } from "./outbox.js"
import { requeueDead } from "./queue.js"
import { type DeliveryContent, type DeliveryPayload, otlpOf, traceItemOf } from "./payload.js"
import { type DeliveryHost, lazyHost, startDeliveryHost } from "./worker-host.js"

export { backoffMs, type BroadcastStats, retryAfterMs, type TestResult } from "./engine.js"

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
    const url = config.databaseUrl
    const main = yield* MainConnection

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

    /** Whether any destination exists (in any workspace). */
    const anyDestination = sql<{ n: number }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM observability_destinations LIMIT 1) AS d`.pipe(
      Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0),
    )
    const outbox = makeOutbox({ load: (ids) => run(loadTargets(ids)), seal: secrets.seal })
    // Called on commits only, once the layer (and `worker` below) is built.
    const ensureWorker = () => worker.ensure?.()
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
    const unlisten = destinations.onChange((workspaceId) => {
      outbox.invalidate(workspaceId)
      // A destination made (here or in another process): the Worker may have work from now on.
      if (worker.ensure !== undefined && worker.starts?.() === 0) {
        run(anyDestination).then(
          (any) => (any ? ensureWorker() : undefined),
          () => ensureWorker(),
        )
      }
    })
    yield* Effect.addFinalizer(() =>
      Effect.sync(() => {
        unregister()
        unlisten()
      }),
    )

    // ---- delivery: the Worker, or this thread for an in-memory database ----

    const worker: Omit<DeliveryHost, "kill" | "starts"> & Partial<Pick<DeliveryHost, "kill" | "starts">> & { readonly ensure?: () => void } =
      url === ":memory:" || settings.inThread === true
        ? (() => {
            const queue = sqlDeliveryQueue(sql, run)
            const engine = makeDeliveryEngine({
              sql,
              run,
              log,
              settings,
              allowPrivateAddresses: config.allowPrivateAddresses,
              queue,
              resolved: destinations.resolved,
              open: secrets.open,
            })
            engine.start()
            return { stats: engine.stats, maintain: engine.maintain, resetBreaker: engine.resetBreaker, finish: engine.finish }
          })()
        : lazyHost(() =>
            startDeliveryHost(
              {
                databaseUrl: url,
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
    // The Worker starts once there may be something to deliver: a destination (at start, or made
    // later), rows left from an earlier run, or the first batch the outbox adds rows for. A gateway
    // that broadcasts nothing never pays its heap (~67 MB) and its start (~1.2 s of CPU from source).
    if (worker.ensure !== undefined) {
      const rowsWaiting = sql<{ n: number }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM broadcast_deliveries WHERE state = 'pending' LIMIT 1) AS w`.pipe(
        Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0),
      )
      const start = yield* Effect.all([anyDestination, rowsWaiting]).pipe(
        Effect.map(([made, waiting]) => made || waiting),
        Effect.orElseSucceed(() => true),
      )
      if (start) worker.ensure()
    }

    // At shutdown: the ledger's last rows are committed first, then what is due is sent within the grace.
    yield* Effect.addFinalizer(() =>
      Effect.promise(async () => {
        const deadline = Date.now() + Math.min(config.shutdownGraceMs, settings.timeoutMs)
        try {
          await run(generations.flush)
        } catch (e) {
          log(Effect.logError("The ledger's last commit before the broadcast's last pass failed", String(e)))
        }
        await worker.finish(deadline)
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
        const delivery = yield* Effect.promise(() => exporter.deliver(destination.config, traceBatch(otlpOf([item]), [item.view])))
        if ("unsupported" in delivery) return yield* new BadRequest({ message: `Invalid request: ${delivery.unsupported}` })
        return yield* Effect.promise(async (): Promise<TestResult> => {
          const sent = await sendAll(delivery.requests, settings.timeoutMs, config.allowPrivateAddresses)
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
        worker.resetBreaker(id)
        return requeued
      })

    const stats = (): BroadcastStats => worker.stats()

    /** Runs the worker's maintenance now (tests: caps and retention without waiting). */
    const maintainNow = Effect.promise(() => worker.maintain())

    return {
      test,
      redeliver,
      redeliverAny,
      stats,
      maintainNow,
      /** The delivery Worker: ended as a crash would (tests), and how many have started; undefined on this thread. */
      killWorker: () => worker.kill?.(),
      workerStarts: () => worker.starts?.() ?? 0,
      /** A workspace's broadcast switch changed: its targets are read again here and, by notice, in the other processes. */
      invalidate: (workspaceId: string) => destinations.changed(workspaceId),
    } as const
  }),
  dependencies: [Destinations.Default, Secrets.Default, GenerationStore.Default, LedgerHooks.Default],
}) {}
