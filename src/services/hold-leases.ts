/**
 * Hold leases (docs/operations.md, "Money and holds"): a hold (a reservation row) names its
 * process (`instance_id`, `boot_id`) and a lease (`lease_until`, epoch ms). The process renews the
 * lease of all its holds with one UPDATE every third of `holdLeaseMs`; any process releases holds
 * whose lease ran out (their owner died), and a process starting releases those its instance id
 * left under another boot id (its own crash) at once. Settlement deletes a hold as before.
 */
import { Cause, Effect, Schedule } from "effect"
import { isStoreUnavailable } from "../store/unavailable.js"
import { type BudgetLeases, dropUnrenewed, renewable, trackedIds } from "./budget-leases.js"
import { settle } from "./reservations.js"
import type { SpendContext } from "./spend-context.js"

/** A hold as the lease sweep reads it. */
interface HoldRow {
  readonly id: string
  readonly key_hash: string
  readonly user_id: string
  readonly amount_nano: number
  readonly credits_nano: number
}

/** Releases holds as a crash left them: nothing counted as spent, the key's and the user's holds given back. */
const release = (ctx: SpendContext, holds: ReadonlyArray<HoldRow>) =>
  Effect.forEach(
    holds,
    (r) =>
      settle(
        ctx,
        {
          id: r.id,
          keyHash: r.key_hash,
          userId: r.user_id,
          amountNano: Number(r.amount_nano),
          creditsNano: Number(r.credits_nano),
          windowStart: "",
        },
        0,
      ),
    { discard: true },
  ).pipe(Effect.as(holds.length))

/**
 * Renews the lease of every hold and slice of this process: one statement, whatever their
 * number. A slice whose row is gone (swept while this process did not renew) admits nothing more.
 */
export const renewLeases = (ctx: SpendContext, leases: BudgetLeases): Effect.Effect<void> =>
  Effect.suspend(() => {
    const { sql, owner } = ctx
    const known = renewable(leases)
    // Only the slices this process tracks (a slice it lost track of is released by `reconcile`, or by
    // its lease running out), and every hold of a request of its own.
    const tracked = trackedIds(leases)
    const slices = tracked.length === 0 ? sql`is_slice = 0` : sql`(is_slice = 0 OR ${sql.in("id", tracked)})`
    return sql<{ id: string }>`UPDATE reservations SET lease_until = ${Date.now() + owner.leaseMs}
      WHERE boot_id = ${owner.bootId} AND ${slices} RETURNING id`.pipe(
      Effect.tap((rows) => dropUnrenewed(leases, known, new Set(rows.map((r) => r.id)))),
    )
  }).pipe(Effect.asVoid, Effect.orDie)

/** Releases the holds of other processes whose lease ran out (their owner stopped renewing: it died). */
export const sweepExpired = (ctx: SpendContext): Effect.Effect<number> =>
  Effect.suspend(
    () => ctx.sql<HoldRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
      WHERE lease_until < ${Date.now()} AND boot_id <> ${ctx.owner.bootId}`,
  ).pipe(
    Effect.flatMap((holds) => release(ctx, holds)),
    Effect.orDie,
  )

/**
 * At start: releases the holds this instance id left under another boot id (an earlier run
 * that crashed; no need to wait for its lease), then every expired lease.
 */
export const releaseOrphans = (ctx: SpendContext, sweep: Effect.Effect<number>): Effect.Effect<number> =>
  Effect.gen(function* () {
    const own = yield* ctx.sql<HoldRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
      WHERE instance_id = ${ctx.owner.instanceId} AND boot_id <> ${ctx.owner.bootId}`
    return (yield* release(ctx, own)) + (yield* sweep)
  }).pipe(Effect.orDie)

/** Renew, then sweep, every third of the lease, for as long as the scope lives. */
export const renewAndSweep = (ctx: SpendContext, leases: BudgetLeases, renew: Effect.Effect<void>, sweep: Effect.Effect<number>) =>
  Effect.zipRight(renew, sweep).pipe(
    Effect.catchAllCause((cause) => {
      if (!isStoreUnavailable(Cause.squash(cause))) return Effect.logWarning("Renewing or sweeping hold leases failed; trying again next period", cause)
      // The connection was lost: the slices are reconciled with their rows once it is back.
      leases.reconcileDue = true
      return Effect.void
    }),
    Effect.repeat(Schedule.spaced(Math.max(100, Math.floor(ctx.owner.leaseMs / 3)))),
    Effect.delay(Math.max(100, Math.floor(ctx.owner.leaseMs / 3))),
    Effect.forkScoped,
  )
