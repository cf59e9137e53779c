/**
 * One connection to Redis (or Valkey) for the state the gateway processes share: rate limits
 * today (docs/operations.md, "Redis"). Bun's built-in `RedisClient` with its traps handled:
 * - its offline queue is off, and every call races `timeoutMs`: a command never waits out an
 *   outage on the request path (the caller falls back to its process's own state);
 * - after its own retries it gives up for good: this link reconnects by itself, with backoff;
 * - a reconnect drops the subscriptions, so the `onConnect` hooks run again on every connect.
 * An outage is logged once when it begins and once when it ends, never per request.
 */
import { RedisClient } from "bun"

export interface RedisLinkOptions {
  readonly url: string
  /** The deadline of one call on the request path. */
  readonly timeoutMs: number
  /** The first reconnection's delay; doubled per failed attempt up to `backoffMaxMs`. */
  readonly backoffMinMs?: number
  readonly backoffMaxMs?: number
  /** One line per change of state (down with its reason, up again). */
  readonly log: (level: "info" | "warn", message: string) => void
}

/** A call that did not answer within its deadline (or found no connection): the caller uses its own state. */
export class RedisUnavailable extends Error {
  override readonly name = "RedisUnavailable"
}

const NOT_CONNECTED = new RedisUnavailable("not connected")
const TIMED_OUT = new RedisUnavailable("timed out")
/** Calls past their deadline in a row that make a connection down. */
const LATE_IN_A_ROW_IS_DOWN = 3

/** A URL with its password masked, for log lines. */
export const maskedRedisUrl = (url: string): string => {
  try {
    const u = new URL(url)
    if (u.password !== "") u.password = "***"
    return u.toString()
  } catch {
    return "(unparsable URL)"
  }
}

export class RedisLink {
  private client: RedisClient
  private up = false
  private closed = false
  /** Whether the current outage has been logged (reset when the link is up again). */
  private outageLogged = false
  private backoffMs: number
  private reconnectTimer: ReturnType<typeof setTimeout> | undefined
  private readonly connectHooks = new Set<() => void>()
  private readonly scripts = new Map<string, string>()
  /** Calls that passed their deadline since the last one answered in time. */
  private lateInARow = 0
  /** Settles when the first connection attempt has ended, either way. */
  readonly firstAttempt: Promise<void>
  private firstAttemptEnded: () => void = () => {}
  /** Changes of state, for `/v1/ready` and the metrics. */
  outages = 0
  lastError: string | undefined

  constructor(private readonly options: RedisLinkOptions) {
    this.backoffMs = options.backoffMinMs ?? 100
    this.firstAttempt = new Promise((resolve) => {
      this.firstAttemptEnded = resolve
    })
    this.client = this.newClient()
    this.connect()
  }

  /** Whether calls can go through now. */
  get connected(): boolean {
    return this.up && this.client.connected
  }

  /** Runs now when connected and after every (re)connection: subscriptions and resyncs belong here. */
  onConnect(hook: () => void): () => void {
    this.connectHooks.add(hook)
    if (this.connected) hook()
    return () => this.connectHooks.delete(hook)
  }

  /** A command with the request path's deadline; rejects with RedisUnavailable when down or late. */
  send(command: string, args: Array<string>): Promise<unknown> {
    if (!this.connected) return Promise.reject(NOT_CONNECTED)
    return this.withDeadline(this.client.send(command, args))
  }

  /**
   * A Lua script by its SHA (EVALSHA), loading it first when the server does not know it yet
   * (a restarted Redis forgets its scripts).
   */
  async evalScript(source: string, keys: Array<string>, args: Array<string>): Promise<unknown> {
    let sha = this.scripts.get(source)
    if (sha === undefined) {
      sha = String(await this.send("SCRIPT", ["LOAD", source]))
      this.scripts.set(source, sha)
    }
    try {
      return await this.send("EVALSHA", [sha, String(keys.length), ...keys, ...args])
    } catch (e) {
      if (e instanceof RedisUnavailable || !String((e as Error).message).includes("NOSCRIPT")) throw e
      this.scripts.delete(source)
      return this.send("EVAL", [source, String(keys.length), ...keys, ...args])
    }
  }

  /** Loads a script ahead of its first use (on every connection: a restarted Redis forgets them). */
  preload(source: string): void {
    this.onConnect(() => {
      this.client.send("SCRIPT", ["LOAD", source]).then(
        (sha) => this.scripts.set(source, String(sha)),
        () => {},
      )
    })
  }

  /** A second connection for subscriptions (a subscribed connection takes no other commands). */
  subscriber(): RedisLink {
    return new RedisLink({ ...this.options, log: () => {} })
  }

  /** Subscribes `listener` to `channel` now and again after every reconnection. */
  subscribe(channel: string, listener: (message: string) => void): void {
    this.onConnect(() => {
      this.client.subscribe(channel, (message) => listener(message)).catch((e) => this.lost(e))
    })
  }

  close(): void {
    this.closed = true
    if (this.reconnectTimer !== undefined) clearTimeout(this.reconnectTimer)
    this.up = false
    try {
      this.client.close()
    } catch {}
  }

  private newClient(): RedisClient {
    // The offline queue off: a command sent while disconnected fails at once instead of waiting.
    const client = new RedisClient(this.options.url, {
      enableOfflineQueue: false,
      autoReconnect: false,
      connectionTimeout: 2_000,
      enableAutoPipelining: true,
    })
    client.onclose = (error) => {
      if (this.client === client) this.lost(error)
    }
    return client
  }

  private connect(): void {
    if (this.closed) return
    this.client.connect().then(
      () => {
        if (this.closed) return
        this.up = true
        this.backoffMs = this.options.backoffMinMs ?? 100
        if (this.outageLogged) this.options.log("info", `Redis is reachable again at ${maskedRedisUrl(this.options.url)}`)
        this.outageLogged = false
        this.lastError = undefined
        for (const hook of this.connectHooks) {
          try {
            hook()
          } catch {}
        }
        this.firstAttemptEnded()
      },
      (e) => {
        this.lost(e)
        this.firstAttemptEnded()
      },
    )
  }

  private lost(error: unknown): void {
    if (this.closed) return
    this.lateInARow = 0
    const wasUp = this.up
    this.up = false
    this.lastError = error instanceof Error ? error.message : String(error)
    if (!this.outageLogged) {
      this.outageLogged = true
      this.outages++
      this.options.log(
        "warn",
        `Redis unreachable at ${maskedRedisUrl(this.options.url)} (${this.lastError}): sticky sessions, ` +
          "cooldowns and rate limits use this process's own state until it is back",
      )
    }
    if (this.reconnectTimer !== undefined) return
    const delay = wasUp ? 0 : this.backoffMs
    this.backoffMs = Math.min(this.options.backoffMaxMs ?? 2_000, this.backoffMs * 2)
    this.reconnectTimer = setTimeout(() => {
      this.reconnectTimer = undefined
      try {
        this.client.close()
      } catch {}
      this.client = this.newClient()
      this.connect()
    }, delay)
  }

  /**
   * A call raced against the deadline. Late answers in a row mean a Redis that stalls (frozen,
   * overloaded, or a network that drops packets without closing): that is an outage like a closed
   * connection (logged, `/v1/ready` degraded), and the connection is made anew, not kept forever.
   * One late answer alone is not (a slow command, a pause of the server's).
   */
  private withDeadline<T>(call: Promise<T>): Promise<T> {
    let timer: ReturnType<typeof setTimeout> | undefined
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (++this.lateInARow >= LATE_IN_A_ROW_IS_DOWN) this.lost(new Error(`no answer within ${this.options.timeoutMs} ms, ${this.lateInARow} calls in a row`))
        reject(TIMED_OUT)
      }, this.options.timeoutMs)
    })
    return Promise.race([
      call.then((value) => {
        this.lateInARow = 0
        return value
      }),
      late,
    ]).finally(() => clearTimeout(timer))
  }
}
