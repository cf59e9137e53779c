/**
 * Request rate limits per key (`rate_limit` of a key, else the workspace's default from
 * `rate_limits.workspaces` in the config). Checked right after the key, before the body is read:
 * a key over its limit gets 429 with `Retry-After` and `X-RateLimit-*`, and no upstream call.
 * With Redis the count is shared by every process (one GCRA script, under `redis.timeout_ms`, per
 * request of a small limit; a large one is taken in blocks a process admits from for up to a
 * second, so a busy key costs a call per block, not per request: never more than the limit); without it, or while Redis is unreachable, each process counts alone, on a
 * share of the limit (the limit over the live processes Redis last counted, or over the workers of
 * `serve --workers`), so together they never admit more than the limit.
 */
import { Effect } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { intervalMs } from "../domain/keys.js"
import { blockSizeOf, GCRA_SCRIPT, LocalRateLimiter, type RateRule, type RateVerdict, verdictOfScript } from "../routing/rate-limits.js"
import type { KeyRow } from "./KeyStore.js"
import { SharedState } from "./SharedState.js"

export type { RateRule, RateVerdict }

/** The headers of a rate-limited answer. */
export const rateLimitHeaders = (verdict: RateVerdict): Record<string, string> => ({
  "x-ratelimit-limit": String(verdict.limit),
  "x-ratelimit-remaining": String(verdict.remaining),
  // Epoch milliseconds, as the API family sends it.
  "x-ratelimit-reset": String(Math.ceil(verdict.resetAt)),
})

/** How long requests taken from Redis in a block may be admitted from it. */
const BLOCK_MS = 1_000

export class RateLimits extends Effect.Service<RateLimits>()("RateLimits", {
  effect: Effect.gen(function* () {
    const settings = yield* GatewayConfig
    const shared = yield* SharedState
    const link = shared.link
    const local = new LocalRateLimiter()
    link?.preload(GCRA_SCRIPT)
    const defaults = new Map<string, RateRule>()
    for (const [workspace, limit] of Object.entries(settings.catalog.rate_limits?.workspaces ?? {})) {
      const ms = intervalMs(limit.interval)
      if (ms !== undefined) defaults.set(workspace, { requests: limit.requests, intervalMs: ms })
    }
    const rules = new WeakMap<KeyRow, RateRule>()

    /** The rule that applies to a key, or undefined (one field read for a key without one, when no workspace has a default). */
    const ruleOf = (key: KeyRow): RateRule | undefined => {
      if (key.rate_limit_requests === null || key.rate_limit_interval_ms === null) {
        return defaults.size === 0 ? undefined : defaults.get(key.workspace_id)
      }
      let rule = rules.get(key)
      if (rule === undefined) {
        rule = { requests: key.rate_limit_requests, intervalMs: key.rate_limit_interval_ms }
        rules.set(key, rule)
      }
      return rule
    }

    /** This process's share while it counts alone beside others. */
    const shareOf = (rule: RateRule): RateRule => {
      const peers = shared.peers()
      return peers <= 1 ? rule : { requests: Math.max(1, Math.floor(rule.requests / peers)), intervalMs: rule.intervalMs }
    }

    /**
     * Per key and rule: requests taken from Redis and not yet admitted (used within `BLOCK_MS` of
     * their taking or dropped: unused, they were counted, so the key gets fewer, never more), the
     * taking in flight (one at a time: requests that find the block empty wait for it), and the
     * last refusal until it expires (requests over the limit meanwhile are refused without a call).
     */
    interface Block {
      tokens: number
      until: number
      last: RateVerdict
      taking: Promise<void> | undefined
      refusal: RateVerdict | undefined
      refusedUntil: number
    }
    const blocks = new Map<string, Block>()
    let blocksMade = 0
    /** Blocks that can answer nothing more (spent or expired, no refusal in force, nothing being taken): dropped. */
    const sweepBlocks = (now: number) => {
      for (const [key, block] of blocks) {
        if (block.taking === undefined && block.until <= now && block.refusedUntil <= now) blocks.delete(key)
      }
    }
    const blockOf = (key: string, rule: RateRule): Block => {
      let block = blocks.get(key)
      if (block === undefined) {
        // Now and then, as the local limiter does: a key no longer sending holds no block.
        if (++blocksMade % 1024 === 0) sweepBlocks(Date.now())
        block = {
          tokens: 0,
          until: 0,
          last: { admitted: true, limit: rule.requests, remaining: 0, resetAt: 0, retryAfterMs: 0 },
          taking: undefined,
          refusal: undefined,
          refusedUntil: 0,
        }
        blocks.set(key, block)
      }
      return block
    }
    /** From the block without a call, if it can answer: a request left in it, or a refusal still in force. */
    const fromBlock = (block: Block | undefined, now: number): RateVerdict | undefined => {
      if (block === undefined) return undefined
      if (block.tokens > 0 && block.until > now) {
        block.tokens--
        return block.last
      }
      return block.refusal !== undefined && block.refusedUntil > now ? block.refusal : undefined
    }

    const take = async (hash: string, rule: RateRule, wanted: number): Promise<{ verdict: RateVerdict; granted: number }> => {
      const emission = rule.intervalMs / rule.requests
      try {
        const answer = (await link?.evalScript(
          GCRA_SCRIPT,
          [`gw:rl:${hash}:${rule.requests}:${rule.intervalMs}`],
          [String(emission), String(rule.intervalMs - emission), String(wanted)],
        )) as [number, number, number]
        const granted = Number(answer[0])
        return { verdict: verdictOfScript(rule, granted, Number(answer[1]), Number(answer[2])), granted }
      } catch {
        return { verdict: local.check(hash, shareOf(rule), Date.now()), granted: -1 }
      }
    }

    const checkShared = async (hash: string, rule: RateRule): Promise<RateVerdict> => {
      const wanted = blockSizeOf(rule, shared.peers(), BLOCK_MS)
      if (wanted === 1) return (await take(hash, rule, 1)).verdict
      const key = `${hash}:${rule.requests}:${rule.intervalMs}`
      const block = blockOf(key, rule)
      for (let round = 0; round < 8; round++) {
        const answered = fromBlock(block, Date.now())
        if (answered !== undefined) return answered
        if (block.taking === undefined) break
        await block.taking
      }
      let done: () => void = () => {}
      block.taking = new Promise<void>((resolve) => {
        done = resolve
      })
      try {
        const { verdict, granted } = await take(hash, rule, wanted)
        const now = Date.now()
        if (granted > 1) {
          block.tokens = (block.until > now ? block.tokens : 0) + granted - 1
          block.until = now + BLOCK_MS
          block.last = verdict
        } else if (granted === 0) {
          block.refusal = verdict
          block.refusedUntil = now + verdict.retryAfterMs
        }
        return verdict
      } finally {
        block.taking = undefined
        done()
      }
    }

    /** The verdict for one request of the key `hash` under `rule`: at once without Redis or from its block, else from Redis (or the share on failure). */
    const check = (hash: string, rule: RateRule): RateVerdict | Promise<RateVerdict> => {
      if (!link?.connected) return local.check(hash, shareOf(rule), Date.now())
      if (blocks.size > 0) {
        const answered = fromBlock(blocks.get(`${hash}:${rule.requests}:${rule.intervalMs}`), Date.now())
        if (answered !== undefined) return answered
      }
      return checkShared(hash, rule)
    }

    return { ruleOf, check, blockCount: () => blocks.size } as const
  }),
  dependencies: [SharedState.Default],
}) {}
