/**
 * Operations telemetry of the HTTP server as plain JS counters and histograms, rendered in the
 * Prometheus text format at `GET /metrics`. Recording is a few array increments per request: no
 * Effect, no allocation on the hot path (an Effect step costs more than the whole recording).
 *
 * A finished `RequestTrace` (src/pipeline/trace.ts) is what the server turns into these metrics, a
 * `Server-Timing` header and one log line.
 */

/** Seconds; from half a millisecond (gateway overhead) to five minutes (long streams). */
const BUCKETS: ReadonlyArray<number> = [
  0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300,
]
const BUCKET_LABELS = BUCKETS.map((b) => String(b))

/** Escapes a label value for the text format. */
const escapeLabel = (value: string) => value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/\n/g, "\\n")

const labelText = (labels: Readonly<Record<string, string>>) => {
  const parts = Object.entries(labels).map(([k, v]) => `${k}="${escapeLabel(v)}"`)
  return parts.join(",")
}

const formatNumber = (n: number) => (Number.isInteger(n) ? String(n) : n.toPrecision(9).replace(/\.?0+$/, ""))

export class Histogram {
  /** One count per bucket plus +Inf, not cumulative (summed when rendered). */
  private readonly counts = new Float64Array(BUCKETS.length + 1)
  private sum = 0
  private count = 0

  observe(seconds: number): void {
    let i = 0
    while (i < BUCKETS.length && seconds > BUCKETS[i]) i++
    this.counts[i]++
    this.sum += seconds
    this.count++
  }

  get total(): number {
    return this.count
  }

  render(name: string, labels: string, out: Array<string>): void {
    const sep = labels === "" ? "" : ","
    let cumulative = 0
    for (let i = 0; i < BUCKETS.length; i++) {
      cumulative += this.counts[i]
      out.push(`${name}_bucket{${labels}${sep}le="${BUCKET_LABELS[i]}"} ${cumulative}`)
    }
    cumulative += this.counts[BUCKETS.length]
    out.push(`${name}_bucket{${labels}${sep}le="+Inf"} ${cumulative}`)
    const braces = labels === "" ? "" : `{${labels}}`
    out.push(`${name}_sum${braces} ${formatNumber(this.sum)}`)
    out.push(`${name}_count${braces} ${this.count}`)
  }
}

/** A family of histograms keyed by one label value (e.g. the provider). */
class HistogramFamily {
  private readonly byValue = new Map<string, Histogram>()
  constructor(
    readonly name: string,
    readonly help: string,
    readonly label: string,
  ) {}

  of(value: string): Histogram {
    let h = this.byValue.get(value)
    if (h === undefined) {
      h = new Histogram()
      this.byValue.set(value, h)
    }
    return h
  }

  render(out: Array<string>): void {
    out.push(`# HELP ${this.name} ${this.help}`, `# TYPE ${this.name} histogram`)
    for (const [value, h] of this.byValue) h.render(this.name, labelText({ [this.label]: value }), out)
  }
}

/** Requests and latency of one (route, method): the server creates one per registered handler. */
export class RouteMetrics {
  readonly latency = new Histogram()
  /** Count per HTTP status. */
  readonly statuses = new Map<number, number>()
  constructor(
    readonly route: string,
    readonly method: string,
  ) {}

  record(status: number, seconds: number): void {
    this.statuses.set(status, (this.statuses.get(status) ?? 0) + 1)
    this.latency.observe(seconds)
  }
}

/** Numbers read only when scraped (queue depth, writer stats): no cost between scrapes. */
export interface ScrapedGauges {
  readonly ledgerQueueDepth: () => number
  readonly ledgerStats: () => {
    readonly flushes: number
    readonly rowsWritten: number
    readonly failedRows: number
    readonly spooledRows: number
    readonly replayedRows: number
  }
  /** The ledger spool (src/store/spool.ts). */
  readonly spool: () => { readonly generations: number; readonly bytes: number; readonly ageSeconds: number; readonly full: boolean }
  readonly keyCache: () => { readonly hits: number; readonly misses: number }
  /** Requests in flight now (the request lifecycle's count: a stream counts until its last event). */
  readonly inFlight: () => number
  /** Broadcast deliveries by `type\u0000outcome`, the queue's depth and the oldest waiting row's age (src/broadcast/Broadcast.ts). */
  readonly broadcast?: () => {
    readonly outcomes: ReadonlyMap<string, number>
    readonly pending: number
    readonly lagSeconds: number
  }
}

export class GatewayMetrics {
  private readonly routes: Array<RouteMetrics> = []
  /** Gateway time of data-plane requests: total (JSON) or time to the response head (streams), minus upstream time. */
  readonly overhead = new Histogram()
  readonly upstream = new HistogramFamily(
    "gateway_upstream_duration_seconds",
    "Time waiting on the upstream per request, by provider (JSON: until the body is read; streams: until the head)",
    "provider",
  )
  readonly timeToFirstToken = new HistogramFamily(
    "gateway_upstream_ttft_seconds",
    "Time from the upstream call to its first token, by provider",
    "provider",
  )
  /** Streamed responses begun and ended: the difference is the streams open now. */
  streamsStarted = 0
  streamsEnded = 0
  private gauges: ScrapedGauges | undefined

  route(route: string, method: string): RouteMetrics {
    const m = new RouteMetrics(route, method)
    this.routes.push(m)
    return m
  }

  scrape(gauges: ScrapedGauges): void {
    this.gauges = gauges
  }

  /** The Prometheus text exposition (version 0.0.4). */
  render(): string {
    const out: Array<string> = []
    out.push(
      "# HELP gateway_http_requests_total HTTP requests by route, method and status",
      "# TYPE gateway_http_requests_total counter",
    )
    for (const r of this.routes) {
      for (const [status, n] of r.statuses) {
        out.push(`gateway_http_requests_total{${labelText({ route: r.route, method: r.method, status: String(status) })}} ${n}`)
      }
    }
    out.push(
      "# HELP gateway_http_request_duration_seconds Time from the request to the end of its response (streams: to the last event)",
      "# TYPE gateway_http_request_duration_seconds histogram",
    )
    for (const r of this.routes) {
      if (r.latency.total > 0) r.latency.render("gateway_http_request_duration_seconds", labelText({ route: r.route, method: r.method }), out)
    }
    out.push(
      "# HELP gateway_overhead_seconds Gateway time of model requests: total minus upstream time (streams: to the response head)",
      "# TYPE gateway_overhead_seconds histogram",
    )
    this.overhead.render("gateway_overhead_seconds", "", out)
    this.upstream.render(out)
    this.timeToFirstToken.render(out)
    out.push(
      "# HELP gateway_open_streams Streamed responses being relayed now",
      "# TYPE gateway_open_streams gauge",
      `gateway_open_streams ${Math.max(0, this.streamsStarted - this.streamsEnded)}`,
      "# HELP gateway_streams_total Streamed responses started",
      "# TYPE gateway_streams_total counter",
      `gateway_streams_total ${this.streamsStarted}`,
    )
    if (this.gauges !== undefined) {
      const stats = this.gauges.ledgerStats()
      out.push(
        "# HELP gateway_ledger_queue_depth Generation records waiting for the group commit",
        "# TYPE gateway_ledger_queue_depth gauge",
        `gateway_ledger_queue_depth ${this.gauges.ledgerQueueDepth()}`,
        "# HELP gateway_ledger_flushes_total Group-commit transactions of generation records",
        "# TYPE gateway_ledger_flushes_total counter",
        `gateway_ledger_flushes_total ${stats.flushes}`,
        "# HELP gateway_ledger_rows_written_total Generation records committed",
        "# TYPE gateway_ledger_rows_written_total counter",
        `gateway_ledger_rows_written_total ${stats.rowsWritten}`,
        "# HELP gateway_ledger_failed_rows_total Generation records that could not be written",
        "# TYPE gateway_ledger_failed_rows_total counter",
        `gateway_ledger_failed_rows_total ${stats.failedRows}`,
        "# HELP gateway_ledger_spooled_rows_total Generation records put in the ledger spool (the database could not take them)",
        "# TYPE gateway_ledger_spooled_rows_total counter",
        `gateway_ledger_spooled_rows_total ${stats.spooledRows}`,
        "# HELP gateway_ledger_replayed_rows_total Spooled generation records committed since",
        "# TYPE gateway_ledger_replayed_rows_total counter",
        `gateway_ledger_replayed_rows_total ${stats.replayedRows}`,
      )
      const spool = this.gauges.spool()
      out.push(
        "# HELP gateway_ledger_spool_generations Generation records in the ledger spool, not yet committed",
        "# TYPE gateway_ledger_spool_generations gauge",
        `gateway_ledger_spool_generations ${spool.generations}`,
        "# HELP gateway_ledger_spool_bytes Bytes of the ledger spool's file not yet committed",
        "# TYPE gateway_ledger_spool_bytes gauge",
        `gateway_ledger_spool_bytes ${spool.bytes}`,
        "# HELP gateway_ledger_spool_age_seconds Age of the oldest record in the ledger spool (0 when empty)",
        "# TYPE gateway_ledger_spool_age_seconds gauge",
        `gateway_ledger_spool_age_seconds ${spool.ageSeconds.toFixed(1)}`,
        "# HELP gateway_ledger_spool_full 1 while the ledger spool is at its bound (new requests get 503)",
        "# TYPE gateway_ledger_spool_full gauge",
        `gateway_ledger_spool_full ${spool.full ? 1 : 0}`,
      )
      out.push(
        "# HELP gateway_requests_in_flight Requests being handled now (a stream counts until its last event)",
        "# TYPE gateway_requests_in_flight gauge",
        `gateway_requests_in_flight ${this.gauges.inFlight()}`,
      )
      const keys = this.gauges.keyCache()
      out.push(
        "# HELP gateway_key_cache_lookups_total API-key lookups on the request path, by result (hit: from memory)",
        "# TYPE gateway_key_cache_lookups_total counter",
        `gateway_key_cache_lookups_total{result="hit"} ${keys.hits}`,
        `gateway_key_cache_lookups_total{result="miss"} ${keys.misses}`,
      )
      const broadcast = this.gauges.broadcast?.()
      if (broadcast !== undefined) {
        out.push(
          "# HELP gateway_broadcast_deliveries_total Generations handed to observability destinations, by destination type and outcome (delivered, failed: retried, dead, filtered, dropped: over the cap)",
          "# TYPE gateway_broadcast_deliveries_total counter",
        )
        for (const [key, n] of broadcast.outcomes) {
          const [type = "", outcome = ""] = key.split("\u0000")
          out.push(`gateway_broadcast_deliveries_total{${labelText({ type, outcome })}} ${n}`)
        }
        out.push(
          "# HELP gateway_broadcast_queue_depth Deliveries waiting to be sent (including retries), as last counted",
          "# TYPE gateway_broadcast_queue_depth gauge",
          `gateway_broadcast_queue_depth ${broadcast.pending}`,
          "# HELP gateway_broadcast_lag_seconds Age of the oldest waiting delivery, as last counted",
          "# TYPE gateway_broadcast_lag_seconds gauge",
          `gateway_broadcast_lag_seconds ${formatNumber(broadcast.lagSeconds)}`,
        )
      }
    }
    const cpu = process.cpuUsage()
    out.push(
      "# HELP process_cpu_seconds_total User and system CPU time of the process",
      "# TYPE process_cpu_seconds_total counter",
      `process_cpu_seconds_total ${formatNumber((cpu.user + cpu.system) / 1e6)}`,
      "# HELP process_resident_memory_bytes Resident set size",
      "# TYPE process_resident_memory_bytes gauge",
      `process_resident_memory_bytes ${process.memoryUsage.rss()}`,
    )
    return `${out.join("\n")}\n`
  }
}

const REQUEST_ID = /^[\w.:-]{1,128}$/
/** A random prefix per process and a counter: unique, and far cheaper than a UUID per request. */
const idPrefix = Array.from(crypto.getRandomValues(new Uint8Array(6)), (b) => b.toString(16).padStart(2, "0")).join("")
let idCounter = 0

/** The caller's `x-request-id` when it is a sane token, else a new id. */
export const requestIdOf = (headers: Headers): string => {
  const given = headers.get("x-request-id")
  if (given !== null && REQUEST_ID.test(given)) return given
  return `req_${idPrefix}${(++idCounter).toString(36)}`
}
