/**
 * Sticky sessions: (user, session key, model) → the endpoint that served the last success,
 * for a while after that success, so a conversation keeps hitting one provider's prompt
 * cache. In memory per process; with Redis the processes share their choices (shared-routing.ts
 * writes each success and reads a session's before it is routed). Bounded: a Map kept in recency
 * order, the oldest entry evicted at the cap.
 */

export interface StickyOptions {
  /** How long after the last success the session stays on its endpoint. */
  readonly ttlMs: number
  readonly maxEntries: number
}

export const DEFAULT_STICKY_OPTIONS: StickyOptions = { ttlMs: 10 * 60_000, maxEntries: 100_000 }

interface Entry {
  readonly endpointId: string
  readonly at: number
}

/** A caller's session: the user scopes the session id (two users' "chat-1" are two sessions). */
export const sessionScopeOf = (userId: string, sessionKey: string) => `${userId}\u0000${sessionKey}`

/** The key of a session's choice for one model. */
export const stickyKeyOf = (scope: string, modelId: string) => `${scope}\u0000${modelId}`

export class StickySessions {
  private readonly entries = new Map<string, Entry>()
  private readonly options: StickyOptions

  constructor(options: Partial<StickyOptions> = {}) {
    this.options = { ...DEFAULT_STICKY_OPTIONS, ...options }
  }

  get size(): number {
    return this.entries.size
  }

  /** The endpoint id the session is on, while fresh. */
  get(key: string, now: number): string | undefined {
    const e = this.entries.get(key)
    if (e === undefined) return undefined
    if (now - e.at >= this.options.ttlMs) {
      this.entries.delete(key)
      return undefined
    }
    // Re-inserted to mark it recently used (Map iteration order is insertion order).
    this.entries.delete(key)
    this.entries.set(key, e)
    return e.endpointId
  }

  /** Another process's choice for the session, taken unless this process has a newer one of its own. */
  adopt(key: string, endpointId: string, at: number): void {
    const mine = this.entries.get(key)
    if (mine !== undefined && mine.at >= at) return
    this.set(key, endpointId, at)
  }

  /** After a success: the session stays on this endpoint for the TTL from now. */
  set(key: string, endpointId: string, now: number): void {
    this.entries.delete(key)
    if (this.entries.size >= this.options.maxEntries) {
      const oldest = this.entries.keys().next()
      if (!oldest.done) this.entries.delete(oldest.value)
    }
    this.entries.set(key, { endpointId, at: now })
  }
}
