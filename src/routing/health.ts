/**
 * Per-endpoint health, in memory per process: consecutive retryable failures put an endpoint
 * in a cooldown that grows each time it trips again, and rolling averages (EWMA) of time to
 * first token and output tokens per second feed `sort: latency | throughput`. Every update is
 * a plain function call from the data plane (no Effect, no I/O on the hot path). Keyed by
 * endpoint id (`provider/upstream_model`): one upstream, whichever catalog model it serves.
 */

export interface HealthOptions {
  /** Consecutive retryable failures that trip a cooldown. */
  readonly failureThreshold: number
  /** The first cooldown; each later trip without a success in between doubles it. */
  readonly baseCooldownMs: number
  readonly maxCooldownMs: number
  /** Weight of the newest sample in the rolling averages. */
  readonly alpha: number
}

export const DEFAULT_HEALTH_OPTIONS: HealthOptions = {
  failureThreshold: 3,
  baseCooldownMs: 30_000,
  maxCooldownMs: 10 * 60_000,
  alpha: 0.3,
}

interface Entry {
  consecutiveFailures: number
  /** Cooldowns tripped since the last success (sets the length of the next one). */
  trips: number
  cooldownUntil: number
  latencyMs: number | undefined
  throughput: number | undefined
}

export interface EndpointStats {
  readonly consecutiveFailures: number
  readonly cooldownUntil: number
  /** EWMA of time to first token, ms; undefined until measured. */
  readonly latencyMs: number | undefined
  /** EWMA of output tokens per second; undefined until measured. */
  readonly throughput: number | undefined
}

export class EndpointHealth {
  private readonly entries = new Map<string, Entry>()
  private readonly options: HealthOptions

  constructor(options: Partial<HealthOptions> = {}) {
    this.options = { ...DEFAULT_HEALTH_OPTIONS, ...options }
  }

  private entry(id: string): Entry {
    let e = this.entries.get(id)
    if (e === undefined) {
      e = { consecutiveFailures: 0, trips: 0, cooldownUntil: 0, latencyMs: undefined, throughput: undefined }
      this.entries.set(id, e)
    }
    return e
  }

  isCoolingDown(id: string, now: number): boolean {
    const e = this.entries.get(id)
    return e !== undefined && e.cooldownUntil > now
  }

  /**
   * A retryable failure. At the threshold the endpoint cools down; after the cooldown it gets
   * one trial, and a failure then trips it again at once, for twice as long. Returns the end of
   * the cooldown it tripped, if it tripped one.
   */
  recordFailure(id: string, now: number): number | undefined {
    const e = this.entry(id)
    e.consecutiveFailures++
    if (e.consecutiveFailures < this.options.failureThreshold || e.cooldownUntil > now) return undefined
    const length = Math.min(this.options.maxCooldownMs, this.options.baseCooldownMs * 2 ** e.trips)
    e.trips++
    e.cooldownUntil = now + length
    return e.cooldownUntil
  }

  /** A call that answered: failures and cooldown are forgotten. Whether the endpoint had been tripped. */
  recordSuccess(id: string): boolean {
    const e = this.entries.get(id)
    if (e === undefined) return false
    const tripped = e.trips > 0 || e.cooldownUntil > 0
    e.consecutiveFailures = 0
    e.trips = 0
    e.cooldownUntil = 0
    return tripped
  }

  /** A cooldown another process tripped (shared through Redis): honoured here until `until`. */
  adoptCooldown(id: string, until: number): void {
    const e = this.entry(id)
    if (until > e.cooldownUntil) e.cooldownUntil = until
  }

  /** Another process's call answered after a cooldown: this one tries the endpoint again too. */
  adoptRecovery(id: string): void {
    this.recordSuccess(id)
  }

  /** Each endpoint's rolling averages, for sharing them with the other processes. */
  figures(): Array<{ readonly id: string; readonly latencyMs: number | undefined; readonly throughput: number | undefined }> {
    const out = []
    for (const [id, e] of this.entries) {
      if (e.latencyMs !== undefined || e.throughput !== undefined) out.push({ id, latencyMs: e.latencyMs, throughput: e.throughput })
    }
    return out
  }

  recordLatency(id: string, ms: number): void {
    if (!Number.isFinite(ms) || ms < 0) return
    const e = this.entry(id)
    e.latencyMs = e.latencyMs === undefined ? ms : e.latencyMs + this.options.alpha * (ms - e.latencyMs)
  }

  recordThroughput(id: string, tokensPerSecond: number): void {
    if (!Number.isFinite(tokensPerSecond) || tokensPerSecond <= 0) return
    const e = this.entry(id)
    e.throughput =
      e.throughput === undefined ? tokensPerSecond : e.throughput + this.options.alpha * (tokensPerSecond - e.throughput)
  }

  latencyOf(id: string): number | undefined {
    return this.entries.get(id)?.latencyMs
  }

  throughputOf(id: string): number | undefined {
    return this.entries.get(id)?.throughput
  }

  stats(id: string): EndpointStats {
    const e = this.entries.get(id)
    return {
      consecutiveFailures: e?.consecutiveFailures ?? 0,
      cooldownUntil: e?.cooldownUntil ?? 0,
      latencyMs: e?.latencyMs,
      throughput: e?.throughput,
    }
  }
}
