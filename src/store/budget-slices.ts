/**
 * Budget slices in the database (src/services/budget-leases.ts): a process takes a slice
 * of a key's remaining budget (and of its user's credits, when they are enforced) with one
 * conditional UPDATE of the key's row, so the slices of every process are in `reserved_nano` and
 * their sum never passes the limit; the slice is a row of `reservations` (`is_slice` = 1) with the
 * owner and lease of any hold, so a crashed process's slice is released when its lease runs out.
 * A slice is at most a share of what is left, and none is taken when that share would cover
 * fewer than a few of the asking request's worst case: near the limit, requests hold one at a time.
 *
 * The same statements through @effect/sql (Postgres, an in-memory SQLite) and as prepared
 * statements on a SQLite connection; rows are taken in the order the ledger's settlement takes
 * them (the slice's row, the key's, the user's), so neither waits for the other crosswise.
 */
import type { SqlClient } from "@effect/sql"
import type { Database } from "bun:sqlite"
import { Effect } from "effect"
import { dayOf } from "./spend-rollup.js"

/** A process takes at most this share of what is left of a key's budget (or of credits) at a time. */
export const SLICE_SHARE = 8
/** A slice that would hold fewer worst cases than this is not taken: the request holds its own. */
export const MIN_SLICE_REQUESTS = 4

/** The slice to take out of `free`: at most `want` and a share of `free`, else 0 (too near the limit). */
export const sliceSize = (free: number, want: number, worst: number): number => {
  const size = Math.min(want, Math.floor(free / SLICE_SHARE))
  return size > 0 && size >= MIN_SLICE_REQUESTS * worst ? size : 0
}

export interface GrantArgs {
  /** The slice's row. */
  readonly sliceId: string
  /** The row does not exist yet (the lease's first grant). */
  readonly create: boolean
  readonly keyHash: string
  readonly userId: string
  /** Take a slice of the key's limit (the key has one). */
  readonly chargesKey: boolean
  /** Take a slice of the user's credits (they are enforced). */
  readonly chargesCredits: boolean
  readonly windowStart: string
  /** The window's start as a time to count the ledger from; undefined for all time. */
  readonly since: string | undefined
  readonly includeByok: boolean
  /** The asking request's worst case, nano-dollars. */
  readonly worstNano: number
  /** The most to take, nano-dollars. */
  readonly wantNano: number
  readonly now: string
  readonly instanceId: string
  readonly bootId: string
  readonly leaseUntil: number
}

/** Taken (the amounts), too near the limit for a slice (nothing taken), or the slice's row is gone (swept). */
export type GrantOutcome =
  | { readonly kind: "granted"; readonly key: number; readonly credits: number }
  | { readonly kind: "near" }
  | { readonly kind: "lost" }

export interface GiveBackArgs {
  readonly sliceId: string
  readonly keyHash: string
  readonly userId: string
  /** Unused, nano-dollars, to give back to the key and to the credits. */
  readonly key: number
  readonly credits: number
}

const NEAR: GrantOutcome = { kind: "near" }
const LOST: GrantOutcome = { kind: "lost" }

/** Rolls the grant's transaction back with its outcome. */
class Rollback {
  constructor(readonly outcome: GrantOutcome) {}
}

/** Through @effect/sql, in a transaction of its own. */
export const grantWith = (sql: SqlClient.SqlClient) => {
  const forUpdate = sql.onDialectOrElse({ pg: () => sql` FOR UPDATE`, orElse: () => sql`` })
  const ledgerWindowSpend = (a: GrantArgs) =>
    sql<{ total: number }>`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ${a.keyHash}
      ${a.includeByok ? sql`` : sql`AND is_byok = 0`}
      ${a.since === undefined ? sql`` : sql`AND day >= ${dayOf(a.since)}`}`.pipe(Effect.map((r) => Number(r[0]?.total ?? 0)))
  return (a: GrantArgs): Effect.Effect<GrantOutcome, unknown> =>
    sql
      .withTransaction(
        Effect.gen(function* () {
          if (!a.create) {
            const own = yield* sql<{ id: string }>`SELECT id FROM reservations WHERE id = ${a.sliceId}${forUpdate}`
            if (own.length === 0) return yield* Effect.fail(new Rollback(LOST))
          }
          let key = 0
          if (a.chargesKey) {
            const rows = yield* sql<{ window_start: string | null; window_spend_nano: number; reserved_nano: number; limit_nano: number | null }>`SELECT
                window_start, window_spend_nano, reserved_nano, limit_nano FROM api_keys WHERE hash = ${a.keyHash}${forUpdate}`
            const row = rows[0]
            if (row === undefined || row.limit_nano === null) return yield* Effect.fail(new Rollback(NEAR))
            const rolled = row.window_start !== a.windowStart
            const carried = rolled ? yield* ledgerWindowSpend(a) : 0
            const spent = rolled ? carried : Number(row.window_spend_nano)
            key = sliceSize(Number(row.limit_nano) - spent - Number(row.reserved_nano), a.wantNano, a.worstNano)
            if (key === 0) return yield* Effect.fail(new Rollback(NEAR))
            // The one conditional UPDATE: the slice is taken only while it fits under the limit whole.
            const updated = yield* sql<{ hash: string }>`UPDATE api_keys SET
                window_spend_nano = CASE WHEN window_start = ${a.windowStart} THEN window_spend_nano ELSE ${carried} END,
                window_start = ${a.windowStart},
                reserved_nano = reserved_nano + ${key}
              WHERE hash = ${a.keyHash} AND limit_nano IS NOT NULL
                AND (CASE WHEN window_start = ${a.windowStart} THEN window_spend_nano ELSE ${carried} END) + reserved_nano + ${key} <= limit_nano
              RETURNING hash`
            if (updated.length === 0) return yield* Effect.fail(new Rollback(NEAR))
          }
          let credits = 0
          if (a.chargesCredits) {
            // Lock the user's row before reading the spend (Postgres): a settlement moves a request's
            // cost from credits_reserved_nano (this row) to spend_daily (another table) in one commit,
            // and a statement that waited for the row would see the lowered hold with the old spend.
            yield* sql.onDialectOrElse({
              pg: () => sql`SELECT id FROM users WHERE id = ${a.userId} FOR UPDATE`,
              orElse: () => Effect.void,
            })
            const rows = yield* sql<{ granted: number; spent: number; held: number }>`SELECT
                (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = ${a.userId}) AS granted,
                (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = ${a.userId} AND is_byok = 0) AS spent,
                (SELECT COALESCE(MAX(credits_reserved_nano), 0) FROM users WHERE id = ${a.userId}) AS held`
            const row = rows[0]
            credits = sliceSize(Number(row?.granted ?? 0) - Number(row?.spent ?? 0) - Number(row?.held ?? 0), a.wantNano, a.worstNano)
            if (credits === 0) return yield* Effect.fail(new Rollback(NEAR))
            const updated = yield* sql<{ id: string }>`UPDATE users SET credits_reserved_nano = credits_reserved_nano + ${credits}
              WHERE id = ${a.userId}
                AND (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = ${a.userId})
                  - (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = ${a.userId} AND is_byok = 0)
                  - credits_reserved_nano >= ${credits}
              RETURNING id`
            if (updated.length === 0) return yield* Effect.fail(new Rollback(NEAR))
          }
          if (a.create) {
            yield* sql`INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at, instance_id, boot_id, lease_until, is_slice)
              VALUES (${a.sliceId}, ${a.keyHash}, ${a.userId}, ${key}, ${credits}, ${a.now}, ${a.instanceId}, ${a.bootId}, ${a.leaseUntil}, 1)`
          } else {
            yield* sql`UPDATE reservations SET amount_nano = amount_nano + ${key}, credits_nano = credits_nano + ${credits},
              lease_until = ${a.leaseUntil} WHERE id = ${a.sliceId}`
          }
          return { kind: "granted", key, credits } satisfies GrantOutcome as GrantOutcome
        }),
      )
      .pipe(Effect.catchIf((e): e is Rollback => e instanceof Rollback, (e) => Effect.succeed(e.outcome)))
}

/** Gives back what a slice did not use, through @effect/sql; its row goes once it holds nothing. */
export const giveBackWith =
  (sql: SqlClient.SqlClient) =>
  (a: GiveBackArgs): Effect.Effect<void, unknown> =>
    sql.withTransaction(
      Effect.gen(function* () {
        const rows = yield* sql<{ amount_nano: number; credits_nano: number }>`UPDATE reservations SET
            amount_nano = CASE WHEN amount_nano > ${a.key} THEN amount_nano - ${a.key} ELSE 0 END,
            credits_nano = CASE WHEN credits_nano > ${a.credits} THEN credits_nano - ${a.credits} ELSE 0 END
          WHERE id = ${a.sliceId} RETURNING amount_nano, credits_nano`
        // Gone: swept (its lease ran out), and what it held was released with it.
        if (rows.length === 0) return
        if (a.key > 0) {
          yield* sql`UPDATE api_keys SET reserved_nano = CASE WHEN reserved_nano > ${a.key} THEN reserved_nano - ${a.key} ELSE 0 END
            WHERE hash = ${a.keyHash}`
        }
        if (a.credits > 0) {
          yield* sql`UPDATE users SET credits_reserved_nano = CASE WHEN credits_reserved_nano > ${a.credits}
            THEN credits_reserved_nano - ${a.credits} ELSE 0 END WHERE id = ${a.userId}`
        }
        if (Number(rows[0]!.amount_nano) === 0 && Number(rows[0]!.credits_nano) === 0) yield* sql`DELETE FROM reservations WHERE id = ${a.sliceId}`
      }),
    )

/** The same two as prepared statements on a SQLite connection, each in an IMMEDIATE transaction. */
export const sliceStatementsOn = (db: Database) => {
  const ownSlice = db.query<{ id: string }, [string]>("SELECT id FROM reservations WHERE id = ?")
  const keyRow = db.query<{ window_start: string | null; window_spend_nano: number; reserved_nano: number; limit_nano: number | null }, [string]>(
    "SELECT window_start, window_spend_nano, reserved_nano, limit_nano FROM api_keys WHERE hash = ?",
  )
  const ledgerSpend = (a: GrantArgs): number => {
    const byok = a.includeByok ? "" : " AND is_byok = 0"
    const since = a.since === undefined ? "" : " AND day >= ?"
    const q = db.query<{ total: number }, Array<string>>(`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ?${byok}${since}`)
    return Number(q.get(...(a.since === undefined ? [a.keyHash] : [a.keyHash, dayOf(a.since)]))?.total ?? 0)
  }
  const takeKey = db.query<{ hash: string }, Record<string, string | number>>(
    `UPDATE api_keys SET
       window_spend_nano = CASE WHEN window_start = $windowStart THEN window_spend_nano ELSE $carried END,
       window_start = $windowStart,
       reserved_nano = reserved_nano + $amount
     WHERE hash = $hash AND limit_nano IS NOT NULL
       AND (CASE WHEN window_start = $windowStart THEN window_spend_nano ELSE $carried END) + reserved_nano + $amount <= limit_nano
     RETURNING hash`,
  )
  const creditsFree = db.query<{ granted: number; spent: number; held: number }, Record<string, string>>(
    `SELECT (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = $userId) AS granted,
       (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = $userId AND is_byok = 0) AS spent,
       (SELECT COALESCE(MAX(credits_reserved_nano), 0) FROM users WHERE id = $userId) AS held`,
  )
  const takeCredits = db.query<{ id: string }, Record<string, string | number>>(
    `UPDATE users SET credits_reserved_nano = credits_reserved_nano + $credits
     WHERE id = $userId
       AND (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = $userId)
         - (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = $userId AND is_byok = 0)
         - credits_reserved_nano >= $credits
     RETURNING id`,
  )
  const insertSlice = db.query<unknown, Record<string, string | number>>(
    `INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at, instance_id, boot_id, lease_until, is_slice)
     VALUES ($id, $hash, $userId, $key, $credits, $now, $instanceId, $bootId, $leaseUntil, 1)`,
  )
  const growSlice = db.query<unknown, Record<string, string | number>>(
    "UPDATE reservations SET amount_nano = amount_nano + $key, credits_nano = credits_nano + $credits, lease_until = $leaseUntil WHERE id = $id",
  )
  const lowerSlice = db.query<{ amount_nano: number; credits_nano: number }, Record<string, string | number>>(
    `UPDATE reservations SET
       amount_nano = CASE WHEN amount_nano > $key THEN amount_nano - $key ELSE 0 END,
       credits_nano = CASE WHEN credits_nano > $credits THEN credits_nano - $credits ELSE 0 END
     WHERE id = $id RETURNING amount_nano, credits_nano`,
  )
  const releaseKey = db.query<unknown, Record<string, string | number>>(
    "UPDATE api_keys SET reserved_nano = CASE WHEN reserved_nano > $amount THEN reserved_nano - $amount ELSE 0 END WHERE hash = $hash",
  )
  const releaseCredits = db.query<unknown, Record<string, string | number>>(
    `UPDATE users SET credits_reserved_nano = CASE WHEN credits_reserved_nano > $credits
       THEN credits_reserved_nano - $credits ELSE 0 END WHERE id = $userId`,
  )
  const dropSlice = db.query<unknown, [string]>("DELETE FROM reservations WHERE id = ?")

  const grantIn = db.transaction((a: GrantArgs): GrantOutcome => {
    if (!a.create && ownSlice.all(a.sliceId).length === 0) throw new Rollback(LOST)
    let key = 0
    if (a.chargesKey) {
      const row = keyRow.get(a.keyHash)
      if (row === null || row.limit_nano === null) throw new Rollback(NEAR)
      const rolled = row.window_start !== a.windowStart
      const carried = rolled ? ledgerSpend(a) : 0
      const spent = rolled ? carried : Number(row.window_spend_nano)
      key = sliceSize(Number(row.limit_nano) - spent - Number(row.reserved_nano), a.wantNano, a.worstNano)
      if (key === 0) throw new Rollback(NEAR)
      if (takeKey.all({ windowStart: a.windowStart, carried, amount: key, hash: a.keyHash }).length === 0) throw new Rollback(NEAR)
    }
    let credits = 0
    if (a.chargesCredits) {
      const row = creditsFree.get({ userId: a.userId })
      credits = sliceSize(Number(row?.granted ?? 0) - Number(row?.spent ?? 0) - Number(row?.held ?? 0), a.wantNano, a.worstNano)
      if (credits === 0) throw new Rollback(NEAR)
      if (takeCredits.all({ credits, userId: a.userId }).length === 0) throw new Rollback(NEAR)
    }
    const slice = { id: a.sliceId, key, credits, leaseUntil: a.leaseUntil }
    if (a.create) {
      insertSlice.run({ ...slice, hash: a.keyHash, userId: a.userId, now: a.now, instanceId: a.instanceId, bootId: a.bootId })
    } else growSlice.run(slice)
    return { kind: "granted", key, credits }
  })
  const giveBackIn = db.transaction((a: GiveBackArgs) => {
    const rows = lowerSlice.all({ key: a.key, credits: a.credits, id: a.sliceId })
    if (rows.length === 0) return
    if (a.key > 0) releaseKey.run({ amount: a.key, hash: a.keyHash })
    if (a.credits > 0) releaseCredits.run({ credits: a.credits, userId: a.userId })
    if (Number(rows[0]!.amount_nano) === 0 && Number(rows[0]!.credits_nano) === 0) dropSlice.run(a.sliceId)
  })
  return {
    grant: (a: GrantArgs): GrantOutcome => {
      try {
        return grantIn.immediate(a)
      } catch (e) {
        if (e instanceof Rollback) return e.outcome
        throw e
      }
    },
    giveBack: (a: GiveBackArgs): void => giveBackIn.immediate(a),
  }
}
