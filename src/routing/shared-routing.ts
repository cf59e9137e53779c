/**
 * Routing state shared by the gateway processes through Redis (docs/operations.md, "Redis"):
 * - sticky sessions: a success writes the session's endpoint (HSET, one hash per session with the
 *   sticky TTL); a request with a session reads it before it is routed (Pipeline: routing.ts), so a
 *   session keeps its provider's prompt cache whichever process it lands on;
 * - cooldowns: a tripped endpoint is published at once (pub/sub) and kept in a hash read every
 *   second and on every reconnection, so every process skips it within a second; a tripped
 *   endpoint that answers again is published too;
 * - the rolling latency and throughput behind `sort: latency | throughput`: each process writes its
 *   own every second and reads the mean of every process's (no Redis call per request for these).
 * Everything here is fire-and-forget or under the link's deadline: with Redis away each process
 * routes on what it knows itself.
 */
import type { RedisLink } from "../services/redis-link.js"
import type { EndpointHealth } from "./health.js"
import { type StickySessions, stickyKeyOf } from "./sticky.js"

const COOLDOWNS = "gw:cooldowns"
const FIGURES = "gw:figures"
const CHANNEL = "gw:routing"
/** A process's figures older than this are left out of the mean (the process has stopped). */
const FIGURES_FRESH_MS = 10_000
/** How often the figures are merged and the cooldowns re-read. */
export const SYNC_MS = 1_000

/**
 * What the router tells the other processes and learns from them (shared-routing.ts, through
 * Redis). Called only when something changes that others must know: a session stuck to an
 * endpoint, a cooldown tripped, a tripped endpoint that answered again. Never per plain request.
 */
export interface RouterShare {
  stuck(scope: string, modelId: string, endpointId: string, at: number): void
  tripped(endpointId: string, until: number): void
  recovered(endpointId: string): void
  /** Reads a session's endpoints as the other processes left them into this router's map (under the Redis deadline). */
  fetchSticky(scope: string): Promise<void>
  /** The merged figures of every process, when they are shared (undefined: this process's own). */
  latencyOf(endpointId: string): number | undefined
  throughputOf(endpointId: string): number | undefined
}

/** What of the router the sharing reads and feeds (Router.ts's makeRouter). */
export interface SharedRouter {
  readonly health: EndpointHealth
  readonly sticky: StickySessions
  readonly now: () => number
  readonly shareWith: (share: RouterShare) => void
}

export interface SharedRoutingOptions {
  /** This process's name in the shared hashes and messages. */
  readonly self: string
  readonly stickyTtlMs: number
}

/** A reply of HGETALL as pairs, whichever RESP version the client speaks (a flat array or a map). */
const pairsOf = (reply: unknown): Array<[string, string]> => {
  if (Array.isArray(reply)) {
    const out: Array<[string, string]> = []
    for (let i = 0; i + 1 < reply.length; i += 2) out.push([String(reply[i]), String(reply[i + 1])])
    return out
  }
  if (reply !== null && typeof reply === "object") return Object.entries(reply as Record<string, unknown>).map(([k, v]) => [k, String(v)])
  return []
}

interface Message {
  readonly t: "trip" | "ok"
  readonly id: string
  readonly until?: number
  readonly o: string
}

/** Connects `router` to the others through `link` (commands) and `subscriber` (the channel, SharedState's: not closed here); returns the stop. */
export const shareRouting = (router: SharedRouter, link: RedisLink, subscriber: RedisLink, options: SharedRoutingOptions): (() => void) => {
  const { self, stickyTtlMs } = options
  const latency = new Map<string, number>()
  const throughput = new Map<string, number>()
  const ignore = () => {}

  const adoptCooldowns = (reply: unknown) => {
    const now = router.now()
    for (const [id, until] of pairsOf(reply)) {
      const at = Number(until)
      if (at > now) router.health.adoptCooldown(id, at)
    }
  }

  const share: RouterShare = {
    stuck: (scope, modelId, endpointId, at) => {
      const key = `gw:sticky:${scope}`
      link.send("HSET", [key, modelId, `${endpointId}\n${at}`]).catch(ignore)
      link.send("PEXPIRE", [key, String(stickyTtlMs)]).catch(ignore)
    },
    tripped: (endpointId, until) => {
      link.send("HSET", [COOLDOWNS, endpointId, String(until)]).catch(ignore)
      link.send("PUBLISH", [CHANNEL, JSON.stringify({ t: "trip", id: endpointId, until, o: self } satisfies Message)]).catch(ignore)
    },
    recovered: (endpointId) => {
      link.send("HDEL", [COOLDOWNS, endpointId]).catch(ignore)
      link.send("PUBLISH", [CHANNEL, JSON.stringify({ t: "ok", id: endpointId, o: self } satisfies Message)]).catch(ignore)
    },
    fetchSticky: async (scope) => {
      if (!link.connected) return
      try {
        const reply = await link.send("HGETALL", [`gw:sticky:${scope}`])
        const now = router.now()
        for (const [modelId, value] of pairsOf(reply)) {
          const cut = value.indexOf("\n")
          const endpointId = value.slice(0, cut)
          const at = Number(value.slice(cut + 1))
          if (cut > 0 && now - at < stickyTtlMs) router.sticky.adopt(stickyKeyOf(scope, modelId), endpointId, at)
        }
      } catch {
        // Redis away or slow: this process's own map decides.
      }
    },
    latencyOf: (id) => latency.get(id),
    throughputOf: (id) => throughput.get(id),
  }

  const sync = async () => {
    if (!link.connected) return
    const now = router.now()
    try {
      for (const f of router.health.figures()) {
        link.send("HSET", [FIGURES, `${f.id}\n${self}`, `${f.latencyMs ?? ""}\n${f.throughput ?? ""}\n${now}`]).catch(ignore)
      }
      const [figures, cooldowns] = await Promise.all([link.send("HGETALL", [FIGURES]), link.send("HGETALL", [COOLDOWNS])])
      adoptCooldowns(cooldowns)
      const sums = new Map<string, { lat: number; latN: number; thr: number; thrN: number }>()
      const stale: Array<string> = []
      for (const [field, value] of pairsOf(figures)) {
        const [lat, thr, at] = value.split("\n")
        if (now - Number(at) > FIGURES_FRESH_MS) {
          if (now - Number(at) > 6 * FIGURES_FRESH_MS) stale.push(field)
          continue
        }
        const id = field.slice(0, field.lastIndexOf("\n"))
        const sum = sums.get(id) ?? { lat: 0, latN: 0, thr: 0, thrN: 0 }
        if (lat !== undefined && lat !== "") {
          sum.lat += Number(lat)
          sum.latN++
        }
        if (thr !== undefined && thr !== "") {
          sum.thr += Number(thr)
          sum.thrN++
        }
        sums.set(id, sum)
      }
      latency.clear()
      throughput.clear()
      for (const [id, sum] of sums) {
        if (sum.latN > 0) latency.set(id, sum.lat / sum.latN)
        if (sum.thrN > 0) throughput.set(id, sum.thr / sum.thrN)
      }
      if (stale.length > 0) link.send("HDEL", [FIGURES, ...stale]).catch(ignore)
    } catch {
      // The next second tries again.
    }
  }

  subscriber.subscribe(CHANNEL, (text) => {
    let message: Message
    try {
      message = JSON.parse(text) as Message
    } catch {
      return
    }
    if (message.o === self || typeof message.id !== "string") return
    if (message.t === "trip" && typeof message.until === "number") router.health.adoptCooldown(message.id, message.until)
    else if (message.t === "ok") router.health.adoptRecovery(message.id)
  })
  // After every (re)connection: what was tripped while this process could not hear it.
  link.onConnect(() => {
    link.send("HGETALL", [COOLDOWNS]).then(adoptCooldowns, ignore)
  })
  const timer = setInterval(() => void sync(), SYNC_MS)
  timer.unref()
  router.shareWith(share)
  return () => {
    clearInterval(timer)
  }
}
