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
import { toNanoUsd } from "../domain/pricing.js"

/** What a request holds between reserve and settle. */
export interface Reservation {
  readonly id: string
  readonly keyHash: string
  readonly userId: string
  /** Held against the key's limit, in nano-dollars (0 when the key has none). */
  readonly amountNano: number
  /** Held against the user's credits, in nano-dollars (0 when credits are not enforced or the call is BYOK). */
  readonly creditsNano: number
  /** The window the reservation was taken in, to settle into. */
  readonly windowStart: string
}

/** A reservation to settle, with what the request actually spent against the key. */
export interface SettleArgs extends Reservation {
  /** USD, as the generation's cost: counted as `toNanoUsd(actualUsd)`, the ledger's own rounding, so the two agree exactly. */
  readonly actualUsd: number
}

/** The settlement through @effect/sql (Postgres, an in-memory SQLite), in the caller's transaction. */
export const settlementWith =
  (sql: SqlClient.SqlClient) =>
  (args: SettleArgs) =>
    Effect.gen(function* () {
      const gone = yield* sql<{ id: string }>`DELETE FROM reservations WHERE id = ${args.id} RETURNING id`
      if (gone.length === 0) return
      if (args.amountNano > 0) {
        yield* sql`UPDATE api_keys SET
          reserved_nano = CASE WHEN reserved_nano > ${args.amountNano} THEN reserved_nano - ${args.amountNano} ELSE 0 END,
          window_spend_nano = CASE WHEN window_start = ${args.windowStart} THEN window_spend_nano + ${toNanoUsd(args.actualUsd)} ELSE window_spend_nano END
          WHERE hash = ${args.keyHash}`
      }
      if (args.creditsNano > 0) {
        yield* sql`UPDATE users SET credits_reserved_nano = CASE WHEN credits_reserved_nano > ${args.creditsNano}
          THEN credits_reserved_nano - ${args.creditsNano} ELSE 0 END WHERE id = ${args.userId}`
      }
    })

/** The settlement as prepared statements on a SQLite connection, in the caller's transaction. */
export const settlementOn = (db: Database): ((args: SettleArgs) => void) => {
  const dropReservation = db.query<{ id: string }, [string]>("DELETE FROM reservations WHERE id = ? RETURNING id")
  const releaseKey = db.query<unknown, Record<string, string | number>>(
    `UPDATE api_keys SET
       reserved_nano = CASE WHEN reserved_nano > $amount THEN reserved_nano - $amount ELSE 0 END,
       window_spend_nano = CASE WHEN window_start = $windowStart THEN window_spend_nano + $actual ELSE window_spend_nano END
     WHERE hash = $hash`,
  )
  const releaseCredits = db.query<unknown, Record<string, string | number>>(
    `UPDATE users SET credits_reserved_nano = CASE WHEN credits_reserved_nano > $credits
       THEN credits_reserved_nano - $credits ELSE 0 END WHERE id = $userId`,
  )
  return (args) => {
    if (dropReservation.all(args.id).length === 0) return
    if (args.amountNano > 0) {
      releaseKey.run({ amount: args.amountNano, windowStart: args.windowStart, actual: toNanoUsd(args.actualUsd), hash: args.keyHash })
    }
    if (args.creditsNano > 0) releaseCredits.run({ credits: args.creditsNano, userId: args.userId })
  }
}

