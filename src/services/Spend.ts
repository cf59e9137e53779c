/**
 * Spending limits and credits (DESIGN §6): reserve the worst case before the call, settle the
 * actual after, on every path. The check and the reservation are one conditional UPDATE of the
 * key's row, atomic on SQLite and Postgres alike, so concurrent requests (and processes sharing
 * one database) can never together pass the limit by more than one request's reservation.
 * Keys without a limit cost no I/O here when credits are not enforced. On a SQLite file the
 * same statements run as prepared statements on a connection of their own (src/store/spend-sqlite.ts).
 * Money is integers of nano-dollars (src/domain/pricing.ts): the checks are exact sums.
 *
 * Hold leases: a hold (a reservation row) names its process (`instance_id`, `boot_id`) and a lease
 * (`lease_until`, epoch ms). The process renews the lease of all its holds with one UPDATE every
 * third of `holdLeaseMs`; any process releases holds whose lease ran out (their owner died), and
 * a process starting releases those its instance id left under another boot id (its own crash)
 * at once. Settlement deletes a hold as before.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Clock, Effect, Exit, Option, Runtime, Schedule } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { PaymentRequired } from "../domain/errors.js"
import { fromNanoUsd, toNanoUsd } from "../domain/pricing.js"
import { limitWindowStart, nextReset } from "../domain/windows.js"
import { type Reservation, settlementWith } from "../store/settlement.js"
import { besideMain, MainConnection } from "../store/sqlite-client.js"
import { dayOf } from "../store/spend-rollup.js"
import { openSqliteSpend, type ReserveArgs, type ReserveOutcome, type SqliteSpend } from "../store/spend-sqlite.js"
import type { KeyRow } from "./KeyStore.js"

export type { Reservation } from "../store/settlement.js"

const ALL_TIME = "all"

/** USD for a message: cents when whole, else up to 6 decimals (a request's reservation is often under a cent). */
const usd = (n: number): string => {
  const fixed = n.toFixed(6).replace(/0+$/, "")
  return `$${fixed.endsWith(".") ? `${fixed}00` : fixed.split(".")[1]!.length === 1 ? `${fixed}0` : fixed}`
}

const mayCost = (worstCaseUsd: number) =>
  `this request may cost up to ${usd(worstCaseUsd)} (its prompt and max_output_tokens at the dearest candidate's price)`

/** A hold as the lease sweep reads it. */
interface HoldRow {
  readonly id: string
  readonly key_hash: string
  readonly user_id: string
  readonly amount_nano: number
  readonly credits_nano: number
}

export class Spend extends Effect.Service<Spend>()("Spend", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GatewayConfig
    // A SQLite file: prepared statements on a connection of their own.
    // Postgres and an in-memory SQLite (one connection is the whole database): @effect/sql.
    const url = config.databaseUrl
    const direct =
      isPostgresUrl(url) || url === ":memory:"
        ? undefined
        : yield* Effect.acquireRelease(
            Effect.sync(() => openSqliteSpend(url)),
            (s) => Effect.sync(() => s.close()),
          )
    // Their commits wait for the main connection's permit only while a transaction is open there.
    const beside = besideMain(sql, yield* MainConnection)
    const runtime = yield* Effect.runtime<never>()
    // Who owns the holds this process takes: its configured name and this run of it.
    const lease = { instanceId: config.instanceId, bootId: crypto.randomUUID(), leaseMs: config.holdLeaseMs } as const

    /**
     * Reservations on the SQLite connection, batched by turn of the event loop. The first of a
     * turn is made at once, in the caller's fiber; those asked for after it in the same turn go
     * together when the turn ends, in one transaction (each in its savepoint, in the order asked):
     * one commit (and, while a transaction is open on the main connection, one pass through its
     * permit) for all of them instead of one each (~45 and ~50 µs of CPU per request). A lone
     * request (one connection) never waits a turn: that wait cost it more than the commit it
     * would share.
     */
    const batchedOn = (spend: SqliteSpend) => {
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
    const reserveBatched = direct === undefined ? undefined : batchedOn(direct)

    /** Spend in the key's current limit window according to the ledger (used when the window changed). */
    const ledgerWindowSpend = (args: ReserveArgs) =>
      sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${args.keyHash}
        ${args.includeByok ? sql`` : sql`AND is_byok = 0`}
        ${args.since === undefined ? sql`` : sql`AND day >= ${dayOf(args.since)}`}`.pipe(Effect.map((r) => Number(r[0]?.total ?? 0)))

    /** The 402 of a key whose window cannot hold the request: what it may cost, what is left and held, how to fix it. */
    const refuseKey = (key: KeyRow, nowMs: number, worstCaseUsd: number, args: ReserveArgs) =>
      Effect.gen(function* () {
        // Read after the refusal, for the message only: the figures of that moment, not a second check.
        const rows = yield* sql<{ window_start: string | null; window_spend_nano: number; reserved_nano: number }>`SELECT
            window_start, window_spend_nano, reserved_nano FROM api_keys WHERE hash = ${args.keyHash}`
        const row = rows[0]
        const heldNano = Math.max(0, Number(row?.reserved_nano ?? 0))
        const spentNano = row !== undefined && row.window_start === args.windowStart ? Number(row.window_spend_nano) : yield* ledgerWindowSpend(args)
        const limitNano = Number(key.limit_nano ?? 0)
        const held = fromNanoUsd(heldNano)
        const limit = fromNanoUsd(limitNano)
        const left = fromNanoUsd(Math.max(0, limitNano - spentNano - heldNano))
        const reset = nextReset(key.limit_reset, nowMs)
        return new PaymentRequired({
          message:
            `This API key's spending limit cannot hold this request: ${mayCost(worstCaseUsd)}; ${usd(left)} of this key's ${usd(limit)} ${key.limit_reset ?? "total"} limit ` +
            `is left (${usd(held)} held by requests in flight). Lower max_output_tokens, or raise the key's limit` +
            (reset ? `; it resets at ${reset.toISOString()}.` : "; it does not reset.") +
            " (This is the key's limit, not your account's credits.)",
        })
      })

    /** The 402 of credits that cannot hold the request, with the same figures. */
    const refuseCredits = (userId: string, worstCaseUsd: number) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ granted: number; spent: number; held: number }>`SELECT
            (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = ${userId}) AS granted,
            (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0) AS spent,
            (SELECT COALESCE(MAX(credits_reserved_nano), 0) FROM users WHERE id = ${userId}) AS held`
        const row = rows[0]
        const heldNano = Math.max(0, Number(row?.held ?? 0))
        const held = fromNanoUsd(heldNano)
        const left = fromNanoUsd(Math.max(0, Number(row?.granted ?? 0) - Number(row?.spent ?? 0) - heldNano))
        return new PaymentRequired({
          message:
            `Insufficient credits: ${mayCost(worstCaseUsd)}; ${usd(left)} of your credits is left ` +
            `(${usd(held)} held by requests in flight). Lower max_output_tokens, or add credits to continue.`,
        })
      })

    /** Whether a request on `key` holds anything: the key has a limit it counts toward, or credits are enforced. */
    const holds = (key: KeyRow, options: { readonly isByok: boolean }) =>
      chargesKeyOf(key, options) || chargesCreditsOf(options)
    const chargesKeyOf = (key: KeyRow, options: { readonly isByok: boolean }) =>
      key.limit_usd !== null && (!options.isByok || key.include_byok_in_limit === 1)
    const chargesCreditsOf = (options: { readonly isByok: boolean }) => config.creditsEnforced && !options.isByok

    /** The reservation through @effect/sql (Postgres, in-memory SQLite): "ok", or what refused it (rolled back). */
    const reserveThroughSql = (args: ReserveArgs) => {
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
            const carried = rolled ? yield* ledgerWindowSpend(args) : 0
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
     * Holds `worstCaseUsd` against the key's limit (and the user's credits when enforced).
     * Fails with 402 when the key's window is used up or credits cannot cover the reservation.
     */
    const reserve = (key: KeyRow, worstCaseUsd: number, options: { readonly isByok: boolean }) =>
      Effect.gen(function* () {
        const chargesKey = chargesKeyOf(key, options)
        const chargesCredits = chargesCreditsOf(options)
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
          instanceId: lease.instanceId,
          bootId: lease.bootId,
          // Wall-clock time, not the (injectable) Clock: leases are compared across processes.
          leaseUntil: Date.now() + lease.leaseMs,
        }
        const ok = reserveBatched !== undefined ? yield* reserveBatched(args) : yield* reserveThroughSql(args)
        if (ok === "key") return yield* Effect.flatMap(refuseKey(key, nowMs, worstCaseUsd, args), Effect.fail)
        if (ok === "credits") return yield* Effect.flatMap(refuseCredits(key.user_id, worstCaseUsd), Effect.fail)
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
    const settle = (reservation: Reservation, actualUsd: number) =>
      direct !== undefined
        ? beside(() => direct.settle({ ...reservation, actualUsd })).pipe(Effect.orDie)
        : settleThroughSql(reservation, actualUsd)

    const settleThroughSql = (reservation: Reservation, actualUsd: number) =>
      sql.withTransaction(settlementWith(sql)({ ...reservation, actualUsd })).pipe(Effect.orDie)

    /** Releases holds as a crash left them: nothing counted as spent, the key's and the user's holds given back. */
    const release = (holds: ReadonlyArray<HoldRow>) =>
      Effect.forEach(
        holds,
        (r) =>
          settle(
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

    /** Renews the lease of every hold of this process: one statement, whatever their number. */
    const renewLeases = Effect.suspend(
      () => sql`UPDATE reservations SET lease_until = ${Date.now() + lease.leaseMs} WHERE boot_id = ${lease.bootId}`,
    ).pipe(Effect.asVoid, Effect.orDie)

    /** Releases the holds of other processes whose lease ran out (their owner stopped renewing: it died). */
    const sweepExpired = Effect.suspend(
      () => sql<HoldRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
        WHERE lease_until < ${Date.now()} AND boot_id <> ${lease.bootId}`,
    ).pipe(Effect.flatMap(release), Effect.orDie)

    /**
     * At start: releases the holds this instance id left under another boot id (an earlier run
     * that crashed; no need to wait for its lease), then every expired lease.
     */
    const releaseOrphans = Effect.gen(function* () {
      const own = yield* sql<HoldRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
        WHERE instance_id = ${lease.instanceId} AND boot_id <> ${lease.bootId}`
      return (yield* release(own)) + (yield* sweepExpired)
    }).pipe(Effect.orDie)

    // Renew, then sweep, every third of the lease, for as long as the service lives.
    yield* Effect.zipRight(renewLeases, sweepExpired).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("Renewing or sweeping hold leases failed; trying again next period", cause)),
      Effect.repeat(Schedule.spaced(Math.max(100, Math.floor(lease.leaseMs / 3)))),
      Effect.delay(Math.max(100, Math.floor(lease.leaseMs / 3))),
      Effect.forkScoped,
    )

    /** Open reservations (for tests and metrics). */
    const openReservations = sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations`.pipe(
      Effect.map((r) => Number(r[0]?.n ?? 0)),
      Effect.orDie,
    )

    return { holds, reserve, settle, lease, renewLeases, sweepExpired, releaseOrphans, openReservations } as const
  }),
}) {}
