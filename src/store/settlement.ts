/**
 * Settling reservations (src/services/reservations.ts), one or a batch, in the caller's transaction: on
 * every engine the ledger writer's, so a hold is released in the transaction that writes the
 * generation replacing it (src/store/ledger.ts); otherwise one of their own.
 *
 * Two kinds of hold are settled:
 * - a request's own hold (a row of `reservations`): the row deleted, and only when it was still
 *   there, the key's hold released with the actual spend counted into its window, and the user's
 *   credit hold released;
 * - a request admitted against its process's budget slice (`slice`): the slice row's amounts
 *   lowered by what the request spent, the key's and the user's holds by the same, the spend
 *   counted into the window. What the request held but did not spend went back to the slice in
 *   memory when it finished (Spend's lease).
 *
 * A batch is summed per row in memory and each row changed once, in one order on every path
 * (reservation rows, then keys by hash, then users by id; Spend's grant and give-back take the
 * same order): two transactions never wait for each other's rows crosswise, so a batch settling
 * many keys and users cannot deadlock with a reservation or another process's batch (Postgres).
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect } from "effect"
import { toNanoUsd } from "../domain/pricing.js"

/** A process's budget slice, as a reservation admitted against it refers to it. */
export interface SliceHandle {
  /** The slice's row in `reservations`. */
  readonly id: string
  /** The request finished (its settlement queued): what it held beyond `args.actualUsd` is admissible again. */
  readonly release: (args: SettleArgs) => void
}

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
  /** Admitted in memory against this budget slice (no row of its own); absent for a request's own hold. */
  readonly slice?: SliceHandle
}

/** A reservation to settle, with what the request actually spent against the key. */
export interface SettleArgs extends Reservation {
  /** USD, as the generation's cost: counted as `toNanoUsd(actualUsd)`, the ledger's own rounding, so the two agree exactly. */
  readonly actualUsd: number
}

/** What a batch changes, summed per row. */
interface Plan {
  /** Request holds to delete (their effects apply only to those still there). */
  readonly holds: Array<SettleArgs>
  /** Slice id → what its requests spent against the key and the credits. */
  readonly slices: Map<string, { key: number; credits: number; keyHash: string; userId: string; windowStart: string }>
}

/** A request's actual, in nano-dollars, never more than it held. */
const spentOf = (held: number, actualUsd: number) => (held > 0 ? Math.min(held, Math.max(0, toNanoUsd(actualUsd))) : 0)

const planOf = (list: ReadonlyArray<SettleArgs>): Plan => {
  const plan: Plan = { holds: [], slices: new Map() }
  for (const args of list) {
    if (args.slice === undefined) {
      plan.holds.push(args)
      continue
    }
    const at = plan.slices.get(args.slice.id) ?? { key: 0, credits: 0, keyHash: args.keyHash, userId: args.userId, windowStart: args.windowStart }
    at.key += spentOf(args.amountNano, args.actualUsd)
    at.credits += spentOf(args.creditsNano, args.actualUsd)
    plan.slices.set(args.slice.id, at)
  }
  return plan
}

/** Per key and window: the hold to release and the spend to count; per user: the credit hold to release. */
class Totals {
  readonly keys = new Map<string, { keyHash: string; windowStart: string; release: number; spent: number }>()
  readonly users = new Map<string, number>()
  key(keyHash: string, windowStart: string, release: number, spent: number) {
    if (release === 0 && spent === 0) return
    const id = `${keyHash}\u0000${windowStart}`
    const at = this.keys.get(id) ?? { keyHash, windowStart, release: 0, spent: 0 }
    at.release += release
    at.spent += spent
    this.keys.set(id, at)
  }
  user(userId: string, release: number) {
    if (release > 0) this.users.set(userId, (this.users.get(userId) ?? 0) + release)
  }
  sortedKeys() {
    return [...this.keys.values()].sort((a, b) => (a.keyHash < b.keyHash ? -1 : a.keyHash > b.keyHash ? 1 : a.windowStart < b.windowStart ? -1 : 1))
  }
  sortedUsers() {
    return [...this.users.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
  }
}

const sortedIds = <A>(m: Map<string, A>) => [...m.keys()].sort()

/** Settlements through @effect/sql (Postgres, an in-memory SQLite), in the caller's transaction. */
export const settlementsWith =
  (sql: SqlClient.SqlClient) =>
  (list: ReadonlyArray<SettleArgs>): Effect.Effect<void, unknown> =>
    Effect.gen(function* () {
      if (list.length === 0) return
      const plan = planOf(list)
      const totals = new Totals()
      if (plan.holds.length > 0) {
        const ids = [...new Set(plan.holds.map((h) => h.id))].sort()
        const gone = new Set(
          (yield* sql<{ id: string }>`DELETE FROM reservations WHERE ${sql.in("id", ids)} RETURNING id`).map((r) => r.id),
        )
        for (const h of plan.holds) {
          if (!gone.delete(h.id)) continue
          totals.key(h.keyHash, h.windowStart, h.amountNano, h.amountNano > 0 ? toNanoUsd(h.actualUsd) : 0)
          totals.user(h.userId, h.creditsNano)
        }
      }
      for (const id of sortedIds(plan.slices)) {
        const s = plan.slices.get(id)!
        if (s.key === 0 && s.credits === 0) continue
        const found = yield* sql<{ id: string }>`UPDATE reservations SET
            amount_nano = CASE WHEN amount_nano > ${s.key} THEN amount_nano - ${s.key} ELSE 0 END,
            credits_nano = CASE WHEN credits_nano > ${s.credits} THEN credits_nano - ${s.credits} ELSE 0 END
          WHERE id = ${id} RETURNING id`
        if (found.length === 0) continue
        totals.key(s.keyHash, s.windowStart, s.key, s.key)
        totals.user(s.userId, s.credits)
      }
      for (const k of totals.sortedKeys()) {
        yield* sql`UPDATE api_keys SET
          reserved_nano = CASE WHEN reserved_nano > ${k.release} THEN reserved_nano - ${k.release} ELSE 0 END,
          window_spend_nano = CASE WHEN window_start = ${k.windowStart} THEN window_spend_nano + ${k.spent} ELSE window_spend_nano END
          WHERE hash = ${k.keyHash}`
      }
      for (const [userId, release] of totals.sortedUsers()) {
        yield* sql`UPDATE users SET credits_reserved_nano = CASE WHEN credits_reserved_nano > ${release}
          THEN credits_reserved_nano - ${release} ELSE 0 END WHERE id = ${userId}`
      }
    })

/** One settlement through @effect/sql, in the caller's transaction. */
export const settlementWith = (sql: SqlClient.SqlClient) => {
  const many = settlementsWith(sql)
  return (args: SettleArgs) => many([args])
}

/** Settlements as prepared statements on a SQLite connection, in the caller's transaction. */
export const settlementsOn = (db: Database): ((list: ReadonlyArray<SettleArgs>) => void) => {
  const dropReservation = db.query<{ id: string }, [string]>("DELETE FROM reservations WHERE id = ? RETURNING id")
  const lowerSlice = db.query<{ id: string }, Record<string, string | number>>(
    `UPDATE reservations SET
       amount_nano = CASE WHEN amount_nano > $key THEN amount_nano - $key ELSE 0 END,
       credits_nano = CASE WHEN credits_nano > $credits THEN credits_nano - $credits ELSE 0 END
     WHERE id = $id RETURNING id`,
  )
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
  return (list) => {
    if (list.length === 0) return
    const plan = planOf(list)
    const totals = new Totals()
    for (const h of plan.holds) {
      if (dropReservation.all(h.id).length === 0) continue
      totals.key(h.keyHash, h.windowStart, h.amountNano, h.amountNano > 0 ? toNanoUsd(h.actualUsd) : 0)
      totals.user(h.userId, h.creditsNano)
    }
    for (const id of sortedIds(plan.slices)) {
      const s = plan.slices.get(id)!
      if (s.key === 0 && s.credits === 0) continue
      if (lowerSlice.all({ key: s.key, credits: s.credits, id }).length === 0) continue
      totals.key(s.keyHash, s.windowStart, s.key, s.key)
      totals.user(s.userId, s.credits)
    }
    for (const k of totals.sortedKeys()) {
      releaseKey.run({ amount: k.release, windowStart: k.windowStart, actual: k.spent, hash: k.keyHash })
    }
    for (const [userId, release] of totals.sortedUsers()) releaseCredits.run({ credits: release, userId })
  }
}

/** One settlement as prepared statements on a SQLite connection, in the caller's transaction. */
export const settlementOn = (db: Database): ((args: SettleArgs) => void) => {
  const many = settlementsOn(db)
  return (args) => many([args])
}
