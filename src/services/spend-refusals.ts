/**
 * The 402s of Spend (docs/operations.md, "Money and holds"): what the request may cost, what is
 * left and what is held, in words a caller can act on. Read after the refusal, for the message
 * only: the figures of that moment, not a second check.
 */
import { Effect } from "effect"
import { PaymentRequired } from "../domain/errors.js"
import { fromNanoUsd } from "../domain/pricing.js"
import { nextReset } from "../domain/windows.js"
import { dayOf } from "../store/spend-rollup.js"
import type { ReserveArgs } from "../store/spend-sqlite.js"
import type { KeyRow } from "./KeyStore.js"
import type { SpendContext } from "./spend-context.js"

/** USD for a message: cents when whole, else up to 6 decimals (a request's reservation is often under a cent). */
const usd = (n: number): string => {
  const fixed = n.toFixed(6).replace(/0+$/, "")
  return `$${fixed.endsWith(".") ? `${fixed}00` : fixed.split(".")[1]!.length === 1 ? `${fixed}0` : fixed}`
}

const mayCost = (worstCaseUsd: number) =>
  `this request may cost up to ${usd(worstCaseUsd)} (its prompt and max_output_tokens at the dearest candidate's price)`

/** Spend in the key's current limit window according to the ledger (used when the window changed). */
export const ledgerWindowSpend = ({ sql }: SpendContext, args: ReserveArgs) =>
  sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${args.keyHash}
    ${args.includeByok ? sql`` : sql`AND is_byok = 0`}
    ${args.since === undefined ? sql`` : sql`AND day >= ${dayOf(args.since)}`}`.pipe(Effect.map((r) => Number(r[0]?.total ?? 0)))

/**
 * What is held, in words: requests' own holds, and budget slices that gateway processes
 * (this one or others sharing the database) keep to admit requests without a write. A slice
 * also covers the requests its process admitted until their spend is recorded, so it is named
 * as a slice, not as requests in flight (which may all have finished).
 */
const heldWords = (ctx: SpendContext, heldNano: number, slicedNano: number, processes: number) => {
  const sliced = Math.min(Math.max(0, slicedNano), heldNano)
  const own = `${usd(fromNanoUsd(heldNano - sliced))} held by requests in flight`
  if (sliced === 0) return own
  const idle = `${Number((ctx.config.budgetSliceIdleMs / 1000).toFixed(3))} s`
  return (
    `${own}; ${usd(fromNanoUsd(sliced))} reserved in the budget slices of ${processes} gateway process${processes === 1 ? "" : "es"}, ` +
    `each given back after ${idle} without a request on this key, or at once when the key is changed`
  )
}

/** The 402 of a key whose window cannot hold the request: what it may cost, what is left and held, how to fix it. */
export const refuseKey = (ctx: SpendContext, key: KeyRow, nowMs: number, worstCaseUsd: number, args: ReserveArgs) =>
  Effect.gen(function* () {
    const { sql } = ctx
    const rows = yield* sql<{ window_start: string | null; window_spend_nano: number; reserved_nano: number; sliced: number; processes: number }>`SELECT
        window_start, window_spend_nano, reserved_nano,
        (SELECT COALESCE(SUM(amount_nano), 0) FROM reservations WHERE key_hash = ${args.keyHash} AND is_slice = 1) AS sliced,
        (SELECT COUNT(DISTINCT boot_id) FROM reservations WHERE key_hash = ${args.keyHash} AND is_slice = 1 AND amount_nano > 0) AS processes
      FROM api_keys WHERE hash = ${args.keyHash}`
    const row = rows[0]
    const heldNano = Math.max(0, Number(row?.reserved_nano ?? 0))
    const spentNano = row !== undefined && row.window_start === args.windowStart ? Number(row.window_spend_nano) : yield* ledgerWindowSpend(ctx, args)
    const limitNano = Number(key.limit_nano ?? 0)
    const limit = fromNanoUsd(limitNano)
    const left = fromNanoUsd(Math.max(0, limitNano - spentNano - heldNano))
    const reset = nextReset(key.limit_reset, nowMs)
    return new PaymentRequired({
      message:
        `This API key's spending limit cannot hold this request: ${mayCost(worstCaseUsd)}; ${usd(left)} of this key's ${usd(limit)} ${key.limit_reset ?? "total"} limit ` +
        `is left (${heldWords(ctx, heldNano, Number(row?.sliced ?? 0), Number(row?.processes ?? 0))}). Lower max_output_tokens, or raise the key's limit` +
        (reset ? `; it resets at ${reset.toISOString()}.` : "; it does not reset.") +
        " (This is the key's limit, not your account's credits.)",
    })
  })

/** The 402 of credits that cannot hold the request, with the same figures. */
export const refuseCredits = (ctx: SpendContext, userId: string, worstCaseUsd: number) =>
  Effect.gen(function* () {
    const rows = yield* ctx.sql<{ granted: number; spent: number; held: number; sliced: number; processes: number }>`SELECT
        (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = ${userId}) AS granted,
        (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0) AS spent,
        (SELECT COALESCE(MAX(credits_reserved_nano), 0) FROM users WHERE id = ${userId}) AS held,
        (SELECT COALESCE(SUM(credits_nano), 0) FROM reservations WHERE user_id = ${userId} AND is_slice = 1) AS sliced,
        (SELECT COUNT(DISTINCT boot_id) FROM reservations WHERE user_id = ${userId} AND is_slice = 1 AND credits_nano > 0) AS processes`
    const row = rows[0]
    const heldNano = Math.max(0, Number(row?.held ?? 0))
    const left = fromNanoUsd(Math.max(0, Number(row?.granted ?? 0) - Number(row?.spent ?? 0) - heldNano))
    return new PaymentRequired({
      message:
        `Insufficient credits: ${mayCost(worstCaseUsd)}; ${usd(left)} of your credits is left ` +
        `(${heldWords(ctx, heldNano, Number(row?.sliced ?? 0), Number(row?.processes ?? 0))}). Lower max_output_tokens, or add credits to continue.`,
    })
  })
