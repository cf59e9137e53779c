/**
 * A request's own hold (docs/operations.md, "Money and holds"): the worst case reserved against
 * the key's limit and the user's credits by one conditional UPDATE, a `reservations` row naming
 * its process and lease, and its settlement. On a SQLite file the same statements run as prepared
 * statements on a connection of their own (src/store/spend-sqlite.ts), batched by turn of the
 * event loop; elsewhere through @effect/sql. Budget slices (src/services/budget-leases.ts) fall
 * back to these when a key is near its limit.
 */
import { Cause, Clock, Effect, Exit, Option, Runtime } from "effect"
import { toNanoUsd } from "../domain/pricing.js"
import { limitWindowStart } from "../domain/windows.js"
import { type Reservation, type SettleArgs, settlementWith } from "../store/settlement.js"
import type { ReserveArgs, ReserveOutcome, SqliteSpend } from "../store/spend-sqlite.js"
import type { KeyRow } from "./KeyStore.js"
import { ALL_TIME, type HoldOptions, chargesCreditsOf, chargesKeyOf, type SpendContext } from "./spend-context.js"
import { ledgerWindowSpend, refuseCredits, refuseKey } from "./spend-refusals.js"

/**
 * Reservations on the SQLite connection, batched by turn of the event loop. The first of a
 * turn is made at once, in the caller's fiber; those asked for after it in the same turn go
 * together when the turn ends, in one transaction (each in its savepoint, in the order asked):
 * one commit (and, while a transaction is open on the main connection, one pass through its
 * permit) for all of them instead of one each (~45 and ~50 µs of CPU per request). A lone
 * request (one connection) never waits a turn: that wait cost it more than the commit it
 * would share.
 */
export const batchedOn = (spend: SqliteSpend, beside: SpendContext["beside"], runtime: Runtime.Runtime<never>) => {
  const reserveAll = (list: ReadonlyArray<ReserveArgs>) => beside(() => spend.reserve(list)).pipe(Effect.orDie)
  const waiting: Array<{ readonly args: ReserveArgs; readonly resume: (outcome: Effect.Effect<ReserveOutcome>) => void }> = []
  let turnOpen = false
  const endTurn = () => {
    turnOpen = false
    const batch = waiting.splice(0)
    if (batch.length === 0) return
    Runtime.runCallback(runtime)(reserveAll(batch.map((w) => w.args)), {
      onExit: (exit) => {
        for (let i = 0; i < batch.length; i++) {
          batch[i]!.resume(Exit.isSuccess(exit) ? Effect.succeed(exit.value[i]!) : Effect.die(Cause.squash(exit.cause)))
        }
      },
    })
  }
  return (args: ReserveArgs): Effect.Effect<ReserveOutcome> =>
    Effect.suspend(() => {
      if (turnOpen) return Effect.async<ReserveOutcome>((resume) => void waiting.push({ args, resume }))
      turnOpen = true
      setImmediate(endTurn)
      return Effect.map(reserveAll([args]), (outcomes) => outcomes[0]!)
    })
}

/** The reservation through @effect/sql (Postgres, in-memory SQLite): "ok", or what refused it (rolled back). */
const reserveThroughSql = (ctx: SpendContext, args: ReserveArgs) => {
  const { sql } = ctx
  const { id, keyHash, userId, amount, credits, chargesKey, chargesCredits, windowStart, now, instanceId, bootId, leaseUntil } = args
  return sql.withTransaction(
    Effect.gen(function* () {
      if (chargesKey) {
        // Lock the key's row first (Postgres): a PATCH resetting the window between this read
        // and the UPDATE below would otherwise erase the window's spend.
        const fresh = yield* sql.onDialectOrElse({
          pg: () => sql<{ window_start: string | null }>`SELECT window_start FROM api_keys WHERE hash = ${keyHash} FOR UPDATE`,
          orElse: () => sql<{ window_start: string | null }>`SELECT window_start FROM api_keys WHERE hash = ${keyHash}`,
        })
        const rolled = fresh[0]?.window_start !== windowStart
        const carried = rolled ? yield* ledgerWindowSpend(ctx, args) : 0
        // One conditional UPDATE: admitted only while the window has room left.
        const updated = yield* sql<{ hash: string }>`UPDATE api_keys SET
            window_spend_nano = CASE WHEN window_start = ${windowStart} THEN window_spend_nano ELSE ${carried} END,
            window_start = ${windowStart},
            reserved_nano = reserved_nano + ${amount}
          WHERE hash = ${keyHash} AND limit_nano IS NOT NULL
            AND (CASE WHEN window_start = ${windowStart} THEN window_spend_nano ELSE ${carried} END) + reserved_nano < limit_nano
          RETURNING hash`
        if (updated.length === 0) return "key" as const
      }
      if (chargesCredits) {
        // Lock the user's row first (Postgres): a settlement moves cost from this row's hold to
        // spend_daily in one commit, and an UPDATE that waited for the row would re-check it with
        // the lowered hold but the spend its statement read before the wait (overspending credits).
        yield* sql.onDialectOrElse({
          pg: () => sql`SELECT id FROM users WHERE id = ${userId} FOR UPDATE`,
          orElse: () => Effect.void,
        })
        const updated = yield* sql<{ id: string }>`UPDATE users SET credits_reserved_nano = credits_reserved_nano + ${credits}
          WHERE id = ${userId}
            AND (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = ${userId})
              - (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0)
              - credits_reserved_nano >= ${credits}
          RETURNING id`
        if (updated.length === 0) return "credits" as const
      }
      yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at, instance_id, boot_id, lease_until)
        VALUES (${id}, ${keyHash}, ${userId}, ${amount}, ${credits}, ${now}, ${instanceId}, ${bootId}, ${leaseUntil})`
      return "ok" as const
    }).pipe(
      // A refusal rolls the transaction back so nothing stays held.
      Effect.flatMap((r) => (r === "ok" ? Effect.succeed(r) : Effect.fail(r))),
    ),
  ).pipe(
    Effect.catchIf(
      (e): e is "key" | "credits" => e === "key" || e === "credits",
      (e) => Effect.succeed(e),
    ),
  )
}

/**
 * A request's own hold of `worstCaseUsd` against the key's limit (and the user's credits when
 * enforced): a row of its own. Fails with 402 when the key's window is used up or credits
 * cannot cover the reservation.
 */
export const reserveOwn = (ctx: SpendContext, key: KeyRow, worstCaseUsd: number, options: HoldOptions) =>
  Effect.gen(function* () {
    const chargesKey = chargesKeyOf(key, options)
    const chargesCredits = chargesCreditsOf(ctx.config, options)
    if (!chargesKey && !chargesCredits) return Option.none<Reservation>()
    const nowMs = yield* Clock.currentTimeMillis
    const since = limitWindowStart(key.limit_reset, nowMs)
    const windowStart = since ?? ALL_TIME
    const id = crypto.randomUUID()
    // The worst case rounded to nano-dollars once, as the actual cost will be (so it bounds it).
    const worstCaseNano = toNanoUsd(worstCaseUsd)
    const amount = chargesKey ? worstCaseNano : 0
    const credits = chargesCredits ? worstCaseNano : 0
    const now = new Date(nowMs).toISOString()
    const args: ReserveArgs = {
      id,
      keyHash: key.hash,
      userId: key.user_id,
      amount,
      credits,
      chargesKey,
      chargesCredits,
      windowStart,
      since,
      includeByok: Boolean(key.include_byok_in_limit),
      now,
      instanceId: ctx.owner.instanceId,
      bootId: ctx.owner.bootId,
      // Wall-clock time, not the (injectable) Clock: leases are compared across processes.
      leaseUntil: Date.now() + ctx.owner.leaseMs,
    }
    const attempt = ctx.reserveBatched !== undefined ? ctx.reserveBatched(args) : reserveThroughSql(ctx, args)
    let ok = yield* attempt
    if (ok !== "ok" && ctx.generations.settling(key.hash, ok === "credits" ? key.user_id : undefined)) {
      // A request of this key (or user) has finished and its settlement waits for the ledger's next
      // commit, its whole worst case still held until then: a client asking one request after
      // another near its limit would be refused for the hold of the one before. Once that commit
      // is in, ask again (once; a refusal then stands).
      yield* ctx.generations.flush
      ok = yield* attempt
    }
    if (ok === "key") return yield* Effect.flatMap(refuseKey(ctx, key, nowMs, worstCaseUsd, args), Effect.fail)
    if (ok === "credits") return yield* Effect.flatMap(refuseCredits(ctx, key.user_id, worstCaseUsd), Effect.fail)
    return Option.some({
      id,
      keyHash: key.hash,
      userId: key.user_id,
      amountNano: amount,
      creditsNano: credits,
      windowStart,
    } satisfies Reservation)
  }).pipe(Effect.catchTag("SqlError", Effect.die))

/** Releases the reservation and counts the actual spend into the key's window. Idempotent. */
export const settle = (ctx: SpendContext, reservation: Reservation, actualUsd: number) =>
  Effect.suspend(() => {
    const args: SettleArgs = { ...reservation, actualUsd }
    // Admitted against a slice: what it did not spend is admissible again at once.
    reservation.slice?.release(args)
    const { direct } = ctx
    return direct !== undefined ? ctx.beside(() => direct.settle(args)).pipe(Effect.orDie) : settleThroughSql(ctx, args)
  })

const settleThroughSql = ({ sql }: SpendContext, args: SettleArgs) => sql.withTransaction(settlementWith(sql)(args)).pipe(Effect.orDie)
