/**
 * Per-endpoint rolling windows for `GET /models/{author}/{slug}/endpoints`: uptime over the last
 * 5 minutes, 30 minutes and day, and percentiles of time to first token and of output tokens per
 * second over the last 30 minutes. In memory per process, like the router's health; each update
 * is a plain call from the data plane that writes into preallocated typed arrays (no allocation
 * after an endpoint's first sample). The work (summing buckets, sorting samples) is done when the
 * endpoints are listed, not per request.
 */

const MINUTE_MS = 60_000
const HOUR_MS = 60 * MINUTE_MS
/** Minute buckets: the 5- and 30-minute windows. */
const MINUTES = 30
/** Hour buckets: the day. */
const HOURS = 24
/** Samples kept per measure: the 30-minute percentiles read at most the latest this many. */
export const SAMPLE_CAPACITY = 512
const WINDOW_30M = 30 * MINUTE_MS

export interface Percentiles {
  readonly p50: number
  readonly p75: number
  readonly p90: number
  readonly p99: number
}

export interface RollingSnapshot {
  /** Percent of attempts that answered (endpoint failures only: rate limits and bad requests do not count); null without attempts. */
  readonly uptime5m: number | null
  readonly uptime30m: number | null
  readonly uptime1d: number | null
  /** Time to first token, ms. */
  readonly latency30m: Percentiles | null
  /** Output tokens per second. */
  readonly throughput30m: Percentiles | null
}

/** Success and failure counts per time bucket; a bucket is cleared when its slot is reused. */
class Buckets {
  private readonly ok: Uint32Array
  private readonly failed: Uint32Array
  /** The bucket number (time / width) each slot holds; -1 when unused. */
  private readonly stamp: Float64Array

  constructor(
    private readonly size: number,
    private readonly width: number,
  ) {
    this.ok = new Uint32Array(size)
    this.failed = new Uint32Array(size)
    this.stamp = new Float64Array(size).fill(-1)
  }

  record(ok: boolean, now: number): void {
    const n = Math.floor(now / this.width)
    const slot = n % this.size
    if (this.stamp[slot] !== n) {
      this.stamp[slot] = n
      this.ok[slot] = 0
      this.failed[slot] = 0
    }
    if (ok) this.ok[slot]++
    else this.failed[slot]++
  }

  /** Uptime percent over the latest `count` buckets (the current one included), or null without attempts. */
  uptime(count: number, now: number): number | null {
    const n = Math.floor(now / this.width)
    let ok = 0
    let failed = 0
    for (let i = 0; i < count; i++) {
      const slot = (((n - i) % this.size) + this.size) % this.size
      if (this.stamp[slot] !== n - i) continue
      ok += this.ok[slot]
      failed += this.failed[slot]
    }
    const total = ok + failed
    return total === 0 ? null : Math.round((ok / total) * 10_000) / 100
  }
}

/** The latest samples with their times, in a ring. */
class Samples {
  private readonly values = new Float64Array(SAMPLE_CAPACITY)
  private readonly times = new Float64Array(SAMPLE_CAPACITY)
  private next = 0
  private filled = 0

  record(value: number, now: number): void {
    this.values[this.next] = value
    this.times[this.next] = now
    this.next = (this.next + 1) % SAMPLE_CAPACITY
    if (this.filled < SAMPLE_CAPACITY) this.filled++
  }

  /** Nearest-rank percentiles of the samples taken since `since`, or null when there are none. */
  percentiles(since: number): Percentiles | null {
    const recent: Array<number> = []
    for (let i = 0; i < this.filled; i++) if (this.times[i] > since) recent.push(this.values[i])
    if (recent.length === 0) return null
    recent.sort((a, b) => a - b)
    const at = (p: number) => Math.round(recent[Math.max(0, Math.ceil((p / 100) * recent.length) - 1)] * 100) / 100
    return { p50: at(50), p75: at(75), p90: at(90), p99: at(99) }
  }
}

interface Entry {
  readonly minutes: Buckets
  readonly hours: Buckets
  latency: Samples | undefined
  throughput: Samples | undefined
}

export class RollingStats {
  private readonly entries = new Map<string, Entry>()

  private entry(id: string): Entry {
    let e = this.entries.get(id)
    if (e === undefined) {
      e = { minutes: new Buckets(MINUTES, MINUTE_MS), hours: new Buckets(HOURS, HOUR_MS), latency: undefined, throughput: undefined }
      this.entries.set(id, e)
    }
    return e
  }

  /** An attempt that answered (ok) or failed because the endpoint is unwell. */
  recordOutcome(id: string, ok: boolean, now: number): void {
    const e = this.entry(id)
    e.minutes.record(ok, now)
    e.hours.record(ok, now)
  }

  recordLatency(id: string, ms: number, now: number): void {
    if (!Number.isFinite(ms) || ms < 0) return
    const e = this.entry(id)
    e.latency ??= new Samples()
    e.latency.record(ms, now)
  }

  recordThroughput(id: string, tokensPerSecond: number, now: number): void {
    if (!Number.isFinite(tokensPerSecond) || tokensPerSecond <= 0) return
    const e = this.entry(id)
    e.throughput ??= new Samples()
    e.throughput.record(tokensPerSecond, now)
  }

  snapshot(id: string, now: number): RollingSnapshot {
    const e = this.entries.get(id)
    if (e === undefined) return { uptime5m: null, uptime30m: null, uptime1d: null, latency30m: null, throughput30m: null }
    return {
      uptime5m: e.minutes.uptime(5, now),
      uptime30m: e.minutes.uptime(30, now),
      uptime1d: e.hours.uptime(24, now),
      latency30m: e.latency?.percentiles(now - WINDOW_30M) ?? null,
      throughput30m: e.throughput?.percentiles(now - WINDOW_30M) ?? null,
    }
  }
}
