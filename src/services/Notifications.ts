/**
 * Messages between the processes that share a Postgres database (docs/operations.md): a write that
 * others cache (a key's change, later a budget lease's revocation) publishes a notice, and every
 * process hears it at once instead of when its cache entry expires. A notice is a type and a JSON
 * payload; each subscriber decodes its own type's payload.
 *
 * Sent with `SELECT pg_notify(channel, text)` on the caller's connection (inside the caller's
 * transaction, Postgres delivers it at commit). Heard on a dedicated connection of node-postgres
 * (`pg`), not @effect/sql-pg's listener: that one swallows errors and never reconnects. The
 * listener reconnects with backoff, runs a heartbeat query (a failure or a silence counts as a
 * lost connection), and on every loss and (re)connection tells subscribers to resync (drop what
 * they cache): notices sent while no connection listened are lost. LISTEN needs a session of its
 * own: it does not pass through a pgbouncer in transaction mode.
 *
 * With Redis configured (SharedState), notices go through Redis pub/sub instead, on both engines:
 * no LISTEN connection is opened (so a pgbouncer in transaction mode is fine, and processes on one
 * SQLite file hear each other), and a lost Redis connection resyncs like a lost listener.
 *
 * SQLite without Redis is one process: publishing does nothing and nothing is ever heard.
 */
import { SqlClient } from "@effect/sql"
import type { Client } from "pg"
import { Context, Effect, Either, Runtime, Schema } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { SharedState } from "./SharedState.js"
import { type SupervisorMessage, workerChannel } from "./worker-channel.js"

/** The channel every gateway process on a database listens to. */
export const CHANNEL = "gateway_notices"
/** The same notices through Redis pub/sub, when Redis is configured. */
const REDIS_CHANNEL = "gw:notices"

/** A notice on the wire: its type, its payload, and the process that sent it. */
const Wire = Schema.parseJson(Schema.Struct({ type: Schema.String, payload: Schema.Unknown, origin: Schema.String }))
const decodeWire = Schema.decodeUnknownEither(Wire)

/** Timings of the listener (tests shorten them). */
export interface NotificationSettings {
  /** A heartbeat query this often on the listener's connection. */
  readonly heartbeatMs: number
  /** A heartbeat not answered within this long counts as a lost connection. */
  readonly heartbeatTimeoutMs: number
  /** The first reconnection's delay; doubled per failed attempt up to `backoffMaxMs`. */
  readonly backoffMinMs: number
  readonly backoffMaxMs: number
}

export class NotificationOptions extends Context.Reference<NotificationOptions>()("NotificationOptions", {
  defaultValue: (): NotificationSettings => ({ heartbeatMs: 10_000, heartbeatTimeoutMs: 5_000, backoffMinMs: 50, backoffMaxMs: 5_000 }),
}) {}

export interface NotificationStats {
  /** Successful LISTENs (the first connection and every reconnection). */
  readonly connects: number
  /** Connections lost (errors, ends, failed heartbeats). */
  readonly losses: number
  /** Notices heard and decoded. */
  readonly received: number
  /** Whether the listener is connected and listening now. */
  readonly listening: boolean
  /** The listener's backend process id while connected (for pg_terminate_backend in tests). */
  readonly backendPid: number | undefined
}

/** A subscriber of one type: `own` is true for notices this process sent. */
export type NoticeHandler = (payload: unknown, own: boolean) => void

export class Notifications extends Effect.Service<Notifications>()("Notifications", {
  dependencies: [SharedState.Default],
  // long: the service's layer body, one closure by design: the LISTEN connection, its subscribers, the heartbeat and the finalizers that close them live in its scope (Effect.Service)
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GatewayConfig
    const options = yield* NotificationOptions
    const runtime = yield* Effect.runtime<never>()
    const log = (effect: Effect.Effect<void>) => Runtime.runFork(runtime)(effect)
    const shared = yield* SharedState
    const redis = shared.link
    const enabled = redis === undefined && isPostgresUrl(config.databaseUrl)
    // A worker of `serve --workers` on SQLite without Redis: its siblings hear it through the supervisor.
    const worker = redis === undefined && !enabled ? workerChannel() : undefined
    const origin = crypto.randomUUID()

    const handlers = new Map<string, Set<NoticeHandler>>()
    const resyncs = new Set<() => void>()
    const stats = { connects: 0, losses: 0, received: 0 }

    /** Registers a handler for notices of `type`; returns its removal. */
    const subscribe = (type: string, handler: NoticeHandler): (() => void) => {
      const set = handlers.get(type) ?? new Set<NoticeHandler>()
      set.add(handler)
      handlers.set(type, set)
      return () => set.delete(handler)
    }

    /** Registers what to drop when notices may have been missed (the listener lost or regained its connection). */
    const onResync = (handler: () => void): (() => void) => {
      resyncs.add(handler)
      return () => resyncs.delete(handler)
    }

    const resync = () => {
      for (const handler of resyncs) {
        try {
          handler()
        } catch (e) {
          log(Effect.logError("A notification resync handler failed", String(e)))
        }
      }
    }

    const dispatch = (text: string | undefined) => {
      const decoded = decodeWire(text ?? "")
      if (Either.isLeft(decoded)) return log(Effect.logWarning("An unreadable notice was ignored", String(text).slice(0, 200)))
      stats.received++
      const { type, payload } = decoded.right
      const own = decoded.right.origin === origin
      for (const handler of handlers.get(type) ?? []) {
        try {
          handler(payload, own)
        } catch (e) {
          log(Effect.logError(`A handler of notice "${type}" failed`, String(e)))
        }
      }
    }

    /**
     * Sends a notice to every process on the database (this one too, with `own`). Inside a
     * transaction it is delivered at commit. A failure is logged, not raised: the caches' TTL
     * still bounds how long others serve what changed.
     */
    const publish = (type: string, payload: unknown): Effect.Effect<void> =>
      worker !== undefined
        ? Effect.sync(() => worker.send({ t: "notice", text: JSON.stringify({ type, payload, origin }) }))
        : redis !== undefined
        ? Effect.promise(() =>
            redis.send("PUBLISH", [REDIS_CHANNEL, JSON.stringify({ type, payload, origin })]).then(
              () => undefined,
              (e: unknown) => {
                log(Effect.logWarning(`The notice "${type}" could not be sent through Redis`, String(e)))
              },
            ),
          )
        : enabled
        ? sql`SELECT pg_notify(${CHANNEL}, ${JSON.stringify({ type, payload, origin })})`.pipe(
            Effect.asVoid,
            Effect.catchAll((e) => Effect.logWarning(`The notice "${type}" could not be sent`, e.message)),
          )
        : Effect.void

    // ------------------------------------------------------------------ the listener (Postgres)

    let closed = false
    // The driver, loaded when the listener starts (Postgres only): a SQLite process never loads it.
    let ClientClass: (typeof import("pg"))["Client"] | undefined
    let client: Client | undefined
    let listening = false
    let attempt = 0
    let retry: ReturnType<typeof setTimeout> | undefined
    let heartbeat: ReturnType<typeof setInterval> | undefined

    /** Forgets the connection (once per connection), resyncs, and schedules the next one. */
    const lost = (which: Client, why: string) => {
      if (which !== client) return
      client = undefined
      const wasListening = listening
      listening = false
      if (heartbeat !== undefined) clearInterval(heartbeat)
      heartbeat = undefined
      which.removeAllListeners()
      which.on("error", () => undefined)
      void which.end().catch(() => undefined)
      if (closed) return
      stats.losses++
      if (wasListening) log(Effect.logWarning("The notification listener lost its connection; reconnecting", why))
      // Notices may be missed until the next LISTEN: what is cached is dropped now and again then.
      resync()
      const delay = Math.min(options.backoffMaxMs, options.backoffMinMs * 2 ** attempt)
      attempt++
      retry = setTimeout(connect, delay * (0.5 + Math.random() / 2))
    }

    // Resolved by the first LISTEN: start-up waits for it, so a change is heard from the first request on.
    let markListening: () => void = () => undefined
    const firstListen = new Promise<void>((resolve) => {
      markListening = resolve
    })

    const connect = () => {
      retry = undefined
      if (closed || ClientClass === undefined) return
      const c = new ClientClass({ connectionString: config.databaseUrl, application_name: "gateway-notices", keepAlive: true })
      client = c
      c.on("error", (e) => lost(c, e.message))
      c.on("end", () => lost(c, "the connection ended"))
      c.on("notification", (n) => {
        if (n.channel === CHANNEL) dispatch(n.payload)
      })
      c.connect()
        .then(() => c.query(`LISTEN ${CHANNEL}`))
        .then(
          () => {
            if (c !== client) return
            listening = true
            attempt = 0
            stats.connects++
            markListening()
            resync()
            heartbeat = setInterval(() => beat(c), options.heartbeatMs)
          },
          (e: unknown) => lost(c, e instanceof Error ? e.message : String(e)),
        )
    }

    /** A `SELECT 1` that must answer within the timeout, else the connection counts as lost. */
    const beat = (c: Client) => {
      const timeout = setTimeout(() => lost(c, "the heartbeat was not answered"), options.heartbeatTimeoutMs)
      c.query("SELECT 1").then(
        () => clearTimeout(timeout),
        (e: unknown) => {
          clearTimeout(timeout)
          lost(c, e instanceof Error ? e.message : String(e))
        },
      )
    }

    if (worker !== undefined) {
      const onMessage = (message: SupervisorMessage) => {
        if (message.t === "notice") dispatch(message.text)
      }
      process.on("message", onMessage)
      yield* Effect.addFinalizer(() => Effect.sync(() => process.off("message", onMessage)))
    }

    if (shared.subscriber !== undefined) {
      // Heard on SharedState's subscribed connection; every (re)connection resubscribes and
      // resyncs: notices sent while it was away are lost.
      const subscriber = shared.subscriber
      subscriber.onConnect(() => {
        stats.connects++
        resync()
      })
      subscriber.subscribe(REDIS_CHANNEL, (text) => dispatch(text))
    }

    if (enabled) {
      ClientClass = (yield* Effect.promise(() => import("pg"))).default.Client
      connect()
      yield* Effect.addFinalizer(() =>
        Effect.promise(async () => {
          closed = true
          if (retry !== undefined) clearTimeout(retry)
          if (heartbeat !== undefined) clearInterval(heartbeat)
          const c = client
          client = undefined
          c?.removeAllListeners()
          c?.on("error", () => undefined)
          await c?.end().catch(() => undefined)
        }),
      )
      // Bounded: a database that refuses LISTEN (a pgbouncer in transaction mode) does not stop start-up.
      yield* Effect.timeoutOption(Effect.promise(() => firstListen), "5 seconds")
    }

    return {
      /** False on SQLite without Redis: nothing is sent or heard. */
      enabled: enabled || redis !== undefined || worker !== undefined,
      publish,
      subscribe,
      onResync,
      stats: (): NotificationStats => ({ ...stats, listening: listening || (redis?.connected ?? false), backendPid: listening ? (client?.processID ?? undefined) : undefined }),
    } as const
  }),
}) {}
