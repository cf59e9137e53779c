/**
 * Settling a reservation (src/services/Spend.ts): the reservation row deleted, and only when it
 * was still there, the key's hold released with the actual spend counted into its window, and
 * the user's credit hold released. The same statements on either engine, run in the caller's
 * transaction: on a SQLite file the ledger writer's, so the hold is released in the transaction
 * that writes the generation replacing it; otherwise one of their own.
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect } from "effect"

/** What a request holds between reserve and settle. */
export interface Reservation {
  readonly id: string
  readonly keyHash: string
  readonly userId: string
  /** Held against the key's limit (0 when the key has none). */
  readonly amountUsd: number
  /** Held against the user's credits (0 when credits are not enforced or the call is BYOK). */
  readonly creditsUsd: number
  /** The window the reservation was taken in, to settle into. */
  readonly windowStart: string
}

/** A reservation to settle, with what the request actually spent against the key. */
export interface SettleArgs extends Reservation {
  readonly actualUsd: number
}

/** The settlement through @effect/sql (Postgres, an in-memory SQLite), in the caller's transaction. */
export const settlementWith =
  (sql: SqlClient.SqlClient) =>
  (args: SettleArgs) =>
    Effect.gen(function* () {
      const gone = yield* sql<{ id: string }>`DELETE FROM reservations WHERE id = ${args.id} RETURNING id`
      if (gone.length === 0) return
      if (args.amountUsd > 0) {
        yield* sql`UPDATE api_keys SET
          reserved_usd = CASE WHEN reserved_usd > ${args.amountUsd} THEN reserved_usd - ${args.amountUsd} ELSE 0 END,
          window_spend_usd = CASE WHEN window_start = ${args.windowStart} THEN window_spend_usd + ${args.actualUsd} ELSE window_spend_usd END
          WHERE hash = ${args.keyHash}`
      }
      if (args.creditsUsd > 0) {
        yield* sql`UPDATE users SET credits_reserved_usd = CASE WHEN credits_reserved_usd > ${args.creditsUsd}
          THEN credits_reserved_usd - ${args.creditsUsd} ELSE 0 END WHERE id = ${args.userId}`
      }
    })

/** The settlement as prepared statements on a SQLite connection, in the caller's transaction. */
export const settlementOn = (db: Database): ((args: SettleArgs) => void) => {
  const dropReservation = db.query<{ id: string }, [string]>("DELETE FROM reservations WHERE id = ? RETURNING id")
  const releaseKey = db.query<unknown, Record<string, string | number>>(
    `UPDATE api_keys SET
       reserved_usd = CASE WHEN reserved_usd > $amount THEN reserved_usd - $amount ELSE 0 END,
       window_spend_usd = CASE WHEN window_start = $windowStart THEN window_spend_usd + $actual ELSE window_spend_usd END
     WHERE hash = $hash`,
  )
  const releaseCredits = db.query<unknown, Record<string, string | number>>(
    `UPDATE users SET credits_reserved_usd = CASE WHEN credits_reserved_usd > $credits
       THEN credits_reserved_usd - $credits ELSE 0 END WHERE id = $userId`,
  )
  return (args) => {
    if (dropReservation.all(args.id).length === 0) return
    if (args.amountUsd > 0) {
      releaseKey.run({ amount: args.amountUsd, windowStart: args.windowStart, actual: args.actualUsd, hash: args.keyHash })
    }
    if (args.creditsUsd > 0) releaseCredits.run({ credits: args.creditsUsd, userId: args.userId })
  }
}

