/**
 * The state gateway processes share through Redis when `redis.url` (or REDIS_URL) is set: today
 * the request rate limits of keys. Optional: without Redis every process keeps its own state.
 * While Redis is unreachable the gateway keeps serving on each process's own state (a warning
 * once per outage, `/v1/ready` says "degraded") and reconnects by itself (redis-link.ts).
 */
import { Effect, Redacted, Runtime } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { RedisLink } from "./redis-link.js"

/** How often a process says it is alive: the count of live processes sizes each one's share while Redis is away. */
const HEARTBEAT_MS = 1_000
/** A process not heard from for this long is no longer counted. */
const PEER_TTL_MS = 5_000
const PEERS_KEY = "gw:processes"

export interface SharedStateStatus {
  /** `off`: no Redis configured; `ok`: connected; `degraded`: configured and unreachable. */
  readonly redis: "off" | "ok" | "degraded"
  readonly outages: number
  readonly lastError: string | undefined
}

export class SharedState extends Effect.Service<SharedState>()("SharedState", {
  scoped: Effect.gen(function* () {
    const settings = yield* GatewayConfig
    const runtime = yield* Effect.runtime<never>()
    const config = settings.redis
    const link =
      config === undefined
        ? undefined
        : new RedisLink({
            url: Redacted.value(config.url),
            timeoutMs: config.timeoutMs,
            log: (level, message) =>
              Runtime.runFork(runtime)(level === "warn" ? Effect.logWarning(message) : Effect.logInfo(message)),
          })
    // One connection for every subscription (notices, routing): a subscribed connection takes no other commands.
    const subscriber = link?.subscriber()
    const self = `${settings.instanceId}:${crypto.randomUUID().slice(0, 8)}`
    /** Live processes as last counted in Redis (this one included); without Redis, the supervisor's workers. */
    let peers = Math.max(1, Number(process.env["GATEWAY_WORKERS_TOTAL"] ?? "1") || 1)
    if (link !== undefined) {
      // A reachable Redis is in use from the first request; an unreachable one does not hold the start.
      yield* Effect.promise(() => Promise.race([link.firstAttempt, Bun.sleep(3_000)]))
      const beat = () => {
        const now = Date.now()
        link
          .send("ZADD", [PEERS_KEY, String(now), self])
          .then(() => link.send("ZREMRANGEBYSCORE", [PEERS_KEY, "-inf", String(now - PEER_TTL_MS)]))
          .then(() => link.send("ZCARD", [PEERS_KEY]))
          .then((n) => {
            if (typeof n === "number" && n >= 1) peers = n
          })
          .catch(() => {})
      }
      beat()
      const timer = setInterval(beat, HEARTBEAT_MS)
      timer.unref()
      yield* Effect.addFinalizer(() =>
        Effect.sync(() => {
          clearInterval(timer)
          subscriber?.close()
          link.close()
        }),
      )
    }
    const status = (): SharedStateStatus => ({
      redis: link === undefined ? "off" : link.connected ? "ok" : "degraded",
      outages: link?.outages ?? 0,
      lastError: link?.lastError,
    })
    return { link, subscriber, self, peers: () => peers, status } as const
  }),
}) {}
