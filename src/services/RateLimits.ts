/**
 * Request rate limits per key (`rate_limit` of a key, else the workspace's default from
 * `rate_limits.workspaces` in the config). Checked right after the key, before the body is read:
 * a key over its limit gets 429 with `Retry-After` and `X-RateLimit-*`, and no upstream call.
 * With Redis the count is shared by every process (one GCRA script per request, under
 * `redis.timeout_ms`); without it, or while Redis is unreachable, each process counts alone, on a
 * share of the limit (the limit over the live processes Redis last counted, or over the workers of
 * `serve --workers`), so together they never admit more than the limit.
 */
import { Effect } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { intervalMs } from "../domain/keys.js"
import { GCRA_SCRIPT, LocalRateLimiter, type RateRule, type RateVerdict, verdictOfScript } from "../routing/rate-limits.js"
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

    const checkShared = async (hash: string, rule: RateRule): Promise<RateVerdict> => {
      const emission = rule.intervalMs / rule.requests
      try {
        const answer = (await link?.evalScript(
          GCRA_SCRIPT,
          [`gw:rl:${hash}:${rule.requests}:${rule.intervalMs}`],
          [String(emission), String(rule.intervalMs - emission)],
        )) as [number, number, number]
        return verdictOfScript(rule, answer[0] === 1, Number(answer[1]), Number(answer[2]))
      } catch {
        return local.check(hash, shareOf(rule), Date.now())
      }
    }

    /** The verdict for one request of the key `hash` under `rule`: at once without Redis, else from Redis (or the share on failure). */
    const check = (hash: string, rule: RateRule): RateVerdict | Promise<RateVerdict> =>
      link?.connected ? checkShared(hash, rule) : local.check(hash, shareOf(rule), Date.now())

    return { ruleOf, check } as const
  }),
  dependencies: [SharedState.Default],
}) {}
