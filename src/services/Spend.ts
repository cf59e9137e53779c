/**
 * Spending limits and credits (DESIGN §6): reserve the worst case before the call, settle the
 * actual after, on every path. The check and the reservation are one conditional UPDATE of the
 * key's row, atomic on SQLite and Postgres alike, so concurrent requests (and processes sharing
 * one database) can never together pass the limit by more than one request's reservation.
 * Keys without a limit cost no I/O here when credits are not enforced. On a SQLite file the
 * same statements run as prepared statements on a connection of their own (src/store/spend-sqlite.ts).
 */
import { SqlClient } from "@effect/sql"
import { Cause, Clock, Effect, Exit, Option, Runtime } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { PaymentRequired } from "../domain/errors.js"
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
      sql<{ total: number }>`SELECT COALESCE(SUM(amount_usd), 0) AS total FROM spend_daily WHERE key_hash = ${args.keyHash}
        ${args.includeByok ? sql`` : sql`AND is_byok = 0`}
        ${args.since === undefined ? sql`` : sql`AND day >= ${dayOf(args.since)}`}`.pipe(Effect.map((r) => Number(r[0]?.total ?? 0)))

    /** The 402 of a key whose window cannot hold the request: what it may cost, what is left and held, how to fix it. */
    const refuseKey = (key: KeyRow, nowMs: number, worstCaseUsd: number, args: ReserveArgs) =>
      Effect.gen(function* () {
        // Read after the refusal, for the message only: the figures of that moment, not a second check.
        const rows = yield* sql<{ window_start: string | null; window_spend_usd: number; reserved_usd: number }>`SELECT
            window_start, window_spend_usd, reserved_usd FROM api_keys WHERE hash = ${args.keyHash}`
        const row = rows[0]
        const held = Math.max(0, Number(row?.reserved_usd ?? 0))
        const spent = row !== undefined && row.window_start === args.windowStart ? Number(row.window_spend_usd) : yield* ledgerWindowSpend(args)
        const limit = Number(key.limit_usd ?? 0)
        const reset = nextReset(key.limit_reset, nowMs)
        return new PaymentRequired({
          message:
            `This API key's spending limit cannot hold this request: ${mayCost(worstCaseUsd)}; ${usd(Math.max(0, limit - spent - held))} of this key's ${usd(limit)} ${key.limit_reset ?? "total"} limit ` +
            `is left (${usd(held)} held by requests in flight). Lower max_output_tokens, or raise the key's limit` +
            (reset ? `; it resets at ${reset.toISOString()}.` : "; it does not reset.") +
            " (This is the key's limit, not your account's credits.)",
        })
      })

    /** The 402 of credits that cannot hold the request, with the same figures. */
    const refuseCredits = (userId: string, worstCaseUsd: number) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ granted: number; spent: number; held: number }>`SELECT
            (SELECT COALESCE(SUM(amount_usd), 0) FROM credit_grants WHERE user_id = ${userId}) AS granted,
            (SELECT COALESCE(SUM(amount_usd), 0) FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0) AS spent,
            (SELECT COALESCE(MAX(credits_reserved_usd), 0) FROM users WHERE id = ${userId}) AS held`
        const row = rows[0]
        const held = Math.max(0, Number(row?.held ?? 0))
        const left = Math.max(0, Number(row?.granted ?? 0) - Number(row?.spent ?? 0) - held)
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
      const { id, keyHash, userId, amount, credits, chargesKey, chargesCredits, windowStart, now } = args
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
                window_spend_usd = CASE WHEN window_start = ${windowStart} THEN window_spend_usd ELSE ${carried} END,
                window_start = ${windowStart},
                reserved_usd = reserved_usd + ${amount}
              WHERE hash = ${keyHash} AND limit_usd IS NOT NULL
                AND (CASE WHEN window_start = ${windowStart} THEN window_spend_usd ELSE ${carried} END) + reserved_usd < limit_usd
              RETURNING hash`
            if (updated.length === 0) return "key" as const
          }
          if (chargesCredits) {
            const updated = yield* sql<{ id: string }>`UPDATE users SET credits_reserved_usd = credits_reserved_usd + ${credits}
              WHERE id = ${userId}
                AND (SELECT COALESCE(SUM(amount_usd), 0) FROM credit_grants WHERE user_id = ${userId})
                  - (SELECT COALESCE(SUM(amount_usd), 0) FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0)
                  - credits_reserved_usd >= ${credits}
              RETURNING id`
            if (updated.length === 0) return "credits" as const
          }
          yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_usd, credits_usd, created_at)
            VALUES (${id}, ${keyHash}, ${userId}, ${amount}, ${credits}, ${now})`
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
        const amount = chargesKey ? worstCaseUsd : 0
        const credits = chargesCredits ? worstCaseUsd : 0
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
        }
        const ok = reserveBatched !== undefined ? yield* reserveBatched(args) : yield* reserveThroughSql(args)
        if (ok === "key") return yield* Effect.flatMap(refuseKey(key, nowMs, worstCaseUsd, args), Effect.fail)
        if (ok === "credits") return yield* Effect.flatMap(refuseCredits(key.user_id, worstCaseUsd), Effect.fail)
        return Option.some({
          id,
          keyHash: key.hash,
          userId: key.user_id,
          amountUsd: amount,
          creditsUsd: credits,
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

    /** At start: releases reservations older than the longest request deadline (a crash left them). */
    const releaseStale = (olderThanMs: number) =>
      Effect.gen(function* () {
        const cutoff = new Date((yield* Clock.currentTimeMillis) - olderThanMs).toISOString()
        const stale = yield* sql<{
          id: string
          key_hash: string
          user_id: string
          amount_usd: number
          credits_usd: number
        }>`SELECT id, key_hash, user_id, amount_usd, credits_usd FROM reservations WHERE created_at < ${cutoff}`
        for (const r of stale) {
          yield* settle(
            {
              id: r.id,
              keyHash: r.key_hash,
              userId: r.user_id,
              amountUsd: Number(r.amount_usd),
              creditsUsd: Number(r.credits_usd),
              windowStart: "",
            },
            0,
          )
        }
        return stale.length
      }).pipe(Effect.orDie)

    /** Open reservations (for tests and metrics). */
    const openReservations = sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations`.pipe(
      Effect.map((r) => Number(r[0]?.n ?? 0)),
      Effect.orDie,
    )

    return { holds, reserve, settle, releaseStale, openReservations } as const
  }),
}) {}
