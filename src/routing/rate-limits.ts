/**
 * Request rate limits per key, as GCRA (the generic cell rate algorithm): a key with
 * `{requests: N, interval: I}` may send a burst of N requests, then one every I / N; over any long
 * run it gets N per I. One number per key (its theoretical arrival time, TAT) is the whole state,
 * so the same rule runs in this process (a Map) and in Redis (one script, atomic, on Redis's clock).
 * Plain functions: the check is one Map read and a few additions on the request path.
 */

export interface RateRule {
  readonly requests: number
  readonly intervalMs: number
}

/** What a check answers: admitted or not, and what the X-RateLimit headers say. */
export interface RateVerdict {
  readonly admitted: boolean
  readonly limit: number
  readonly remaining: number
  /** When the key could send a full burst again (epoch ms). */
  readonly resetAt: number
  /** Refused: milliseconds until one more request would be admitted. */
  readonly retryAfterMs: number
}

/** The verdict of GCRA for a key whose TAT was `tat` (0: never seen), at `now`; `nextTat` is what to store. */
export const gcra = (rule: RateRule, tat: number, now: number): RateVerdict & { readonly nextTat: number } => {
  const emission = rule.intervalMs / rule.requests
  const tolerance = rule.intervalMs - emission
  const start = Math.max(tat, now)
  const allowAt = start - tolerance
  if (now < allowAt) {
    return { admitted: false, limit: rule.requests, remaining: 0, resetAt: start, retryAfterMs: allowAt - now, nextTat: tat }
  }
  const nextTat = start + emission
  const remaining = Math.max(0, Math.floor((now + tolerance - nextTat) / emission) + 1)
  return { admitted: true, limit: rule.requests, remaining: Math.min(rule.requests, remaining), resetAt: nextTat, retryAfterMs: 0, nextTat }
}

/**
 * The same rule in Redis, on the server's clock (TIME), so processes with skewed clocks agree,
 * granting up to ARGV[3] requests at once (a block a process then admits without a call; see
 * RateLimits.ts): as many as the bucket has room for, at least one or none. KEYS[1]: the key's
 * TAT; ARGV: emission interval and tolerance in ms, the requests wanted. Returns {granted, TAT
 * after, now} as integers (ms).
 */
export const GCRA_SCRIPT = `
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local emission = tonumber(ARGV[1])
local tolerance = tonumber(ARGV[2])
local wanted = tonumber(ARGV[3] or '1')
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
local room = math.floor((now + tolerance - tat) / emission) + 1
if room < 1 then return {0, tat, now} end
local granted = math.min(wanted, room)
local next_tat = tat + granted * emission
redis.call('SET', KEYS[1], tostring(next_tat), 'PX', math.max(1, math.ceil(next_tat - now)))
return {granted, next_tat, now}
`

/** The verdict the script's answer means (the same arithmetic as `gcra`): admitted when it granted any. */
export const verdictOfScript = (rule: RateRule, granted: number, tat: number, now: number): RateVerdict => {
  const emission = rule.intervalMs / rule.requests
  const tolerance = rule.intervalMs - emission
  if (granted < 1) return { admitted: false, limit: rule.requests, remaining: 0, resetAt: tat, retryAfterMs: Math.max(1, tat - tolerance - now) }
  const remaining = Math.max(0, Math.floor((now + tolerance - tat) / emission) + 1)
  return { admitted: true, limit: rule.requests, remaining: Math.min(rule.requests, remaining), resetAt: tat, retryAfterMs: 0 }
}

/**
 * How many requests one Redis call may take for this process at once: what the limit allows in
 * `blockMs` (so a block is used up in about that long at the limit's pace), and at most a quarter
 * of the limit over the live processes (so no process sits on much of it). 1 for small limits:
 * then every request is one exact call.
 */
export const blockSizeOf = (rule: RateRule, peers: number, blockMs: number): number =>
  Math.max(1, Math.min(Math.floor((rule.requests * blockMs) / rule.intervalMs), Math.floor(rule.requests / (4 * Math.max(1, peers)))))

/** The keys' TATs in this process: exact for one process; the fallback share while Redis is away. */
export class LocalRateLimiter {
  private readonly tats = new Map<string, number>()
  private checks = 0

  constructor(private readonly maxEntries = 100_000) {}

  check(key: string, rule: RateRule, now: number): RateVerdict {
    const verdict = gcra(rule, this.tats.get(key) ?? 0, now)
    if (verdict.admitted) {
      this.tats.set(key, verdict.nextTat)
      // Now and then, and at the cap: keys whose TAT has passed hold no state worth keeping.
      if (++this.checks % 4096 === 0 || this.tats.size > this.maxEntries) this.sweep(now)
    }
    return verdict
  }

  private sweep(now: number): void {
    for (const [key, tat] of this.tats) if (tat <= now) this.tats.delete(key)
  }
}
