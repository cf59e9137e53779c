/**
 * The reservation and settlement of `Spend` (src/services/Spend.ts) on a SQLite file, as prepared
 * statements on a connection of their own: the same statements and conditions as the @effect/sql
 * path Postgres takes, without its per-statement machinery (a limited key's request ran six
 * statements through it, each a fiber pipeline: ~600 µs of CPU more than an unlimited key's).
 * The caller runs each call when no transaction is open on the main connection, or inside its
 * permit (`besideMain`, src/store/sqlite-client.ts), as the ledger writer does, so only another
 * process can hold the write lock (`serve --workers` on one file). The connection does not wait
 * for it (busy_timeout 0: a synchronous wait would stall the event loop): a busy call throws
 * SQLITE_BUSY, rolled back, and `whenUnlocked` runs it again after a pause.
 */
import { Database } from "bun:sqlite"
import { Effect } from "effect"
import { isBusy, prepareOwnConnection } from "./ledger.js"
import { type GiveBackArgs, type GrantArgs, type GrantOutcome, sliceStatementsOn } from "./budget-slices.js"
import { type SettleArgs, settlementOn } from "./settlement.js"
import { dayOf } from "./spend-rollup.js"

export interface ReserveArgs {
  readonly id: string
  readonly keyHash: string
  readonly userId: string
  /** Held against the key's limit, in nano-dollars (0 when the key is not charged). */
  readonly amount: number
  /** Held against the user's credits, in nano-dollars (0 when credits are not charged). */
  readonly credits: number
  readonly chargesKey: boolean
  readonly chargesCredits: boolean
  /** The window's start, or "all" for a key whose limit never resets. */
  readonly windowStart: string
  /** The window's start as a time to count the ledger from; undefined for all time. */
  readonly since: string | undefined
  readonly includeByok: boolean
  readonly now: string
  /** The hold's owner and lease (src/services/hold-leases.ts). */
  readonly instanceId: string
  readonly bootId: string
  /** Epoch ms until which the owner vouches for the hold; it renews the lease of all its holds at once. */
  readonly leaseUntil: number
}

export type ReserveOutcome = "ok" | "key" | "credits"

export interface SqliteSpend {
  /**
   * Reservations in order, in one IMMEDIATE transaction, each in a savepoint of its own: "ok" with
   * the reservation written, or what refused it (only that one rolled back). Each sees the holds
   * of those before it, exactly as one transaction each would.
   */
  readonly reserve: (list: ReadonlyArray<ReserveArgs>) => Array<ReserveOutcome>
  /** Releases the reservation and counts the actual spend into its window; nothing when already settled. */
  readonly settle: (args: SettleArgs) => void
  /** Takes a budget slice (src/store/budget-slices.ts), in an IMMEDIATE transaction. */
  readonly grant: (args: GrantArgs) => GrantOutcome
  /** Gives back what a slice did not use, in an IMMEDIATE transaction. */
  readonly giveBack: (args: GiveBackArgs) => void
  readonly close: () => void
}

/** Thrown inside the transaction to roll it back; caught outside. */
class Refused {
  constructor(readonly reason: "key" | "credits") {}
}

/** How long a write keeps trying while another process holds the lock (the 5 s a busy_timeout gave before). */
const BUSY_GIVE_UP_MS = 5_000
const BUSY = Symbol("busy")

/**
 * `run(write)` again while SQLite answers "busy" (another process's write transaction), after
 * pauses of 1 ms doubling to 50 ms; the event loop serves meanwhile. Each try is a whole
 * transaction that rolled back, so trying again is safe.
 */
export const whenUnlocked =
  <E>(run: <A>(write: () => A) => Effect.Effect<A, E>) =>
  <A>(write: () => A): Effect.Effect<A, E> => {
    const attempt = (): A | typeof BUSY => {
      try {
        return write()
      } catch (e) {
        if (isBusy(e)) return BUSY
        throw e
      }
    }
    const loop = (pauseMs: number, waitedMs: number): Effect.Effect<A, E> =>
      Effect.flatMap(run(attempt), (result) => {
        if (result !== BUSY) return Effect.succeed(result)
        if (waitedMs >= BUSY_GIVE_UP_MS) return Effect.sync(() => write())
        return Effect.zipRight(Effect.sleep(pauseMs), loop(Math.min(50, pauseMs * 2), waitedMs + pauseMs))
      })
    return loop(1, 0)
  }

export const openSqliteSpend = (filename: string): SqliteSpend => {
  const db = new Database(filename, { readwrite: true, create: true, strict: true })
  try {
    return prepare(db)
  } catch (e) {
    db.close()
    throw e
  }
}

const prepare = (db: Database): SqliteSpend => {
  prepareOwnConnection(db)
  const windowOf = db.query<{ window_start: string | null }, [string]>("SELECT window_start FROM api_keys WHERE hash = ?")
  /** The key's spend in a window according to the ledger: four variants (BYOK counted or not, a start or all time). */
  const ledgerSpend = (args: ReserveArgs): number => {
    const byok = args.includeByok ? "" : " AND is_byok = 0"
    if (args.since === undefined) {
      const row = db
        .query<{ total: number }, [string]>(`SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ?${byok}`)
        .get(args.keyHash)
      return Number(row?.total ?? 0)
    }
    const row = db
      .query<{ total: number }, [string, string]>(
        `SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE key_hash = ?${byok} AND day >= ?`,
      )
      .get(args.keyHash, dayOf(args.since))
    return Number(row?.total ?? 0)
  }
  const holdKey = db.query<{ hash: string }, Record<string, string | number>>(
    `UPDATE api_keys SET
       window_spend_nano = CASE WHEN window_start = $windowStart THEN window_spend_nano ELSE $carried END,
       window_start = $windowStart,
       reserved_nano = reserved_nano + $amount
     WHERE hash = $hash AND limit_nano IS NOT NULL
       AND (CASE WHEN window_start = $windowStart THEN window_spend_nano ELSE $carried END) + reserved_nano < limit_nano
     RETURNING hash`,
  )
  const holdCredits = db.query<{ id: string }, Record<string, string | number>>(
    `UPDATE users SET credits_reserved_nano = credits_reserved_nano + $credits
     WHERE id = $userId
       AND (SELECT COALESCE(SUM(amount_nano), 0) FROM credit_grants WHERE user_id = $userId)
         - (SELECT COALESCE(SUM(amount_nano), 0) FROM spend_daily WHERE user_id = $userId AND is_byok = 0)
         - credits_reserved_nano >= $credits
     RETURNING id`,
  )
  const insertReservation = db.query<unknown, Record<string, string | number>>(
    `INSERT INTO reservations (id, key_hash, user_id, amount_nano, credits_nano, created_at, instance_id, boot_id, lease_until)
     VALUES ($id, $hash, $userId, $amount, $credits, $now, $instanceId, $bootId, $leaseUntil)`,
  )
  const reserveIn = db.transaction((args: ReserveArgs) => {
    if (args.chargesKey) {
      const rolled = windowOf.get(args.keyHash)?.window_start !== args.windowStart
      const carried = rolled ? ledgerSpend(args) : 0
      const held = holdKey.all({ windowStart: args.windowStart, carried, amount: args.amount, hash: args.keyHash })
      if (held.length === 0) throw new Refused("key")
    }
    if (args.chargesCredits) {
      const held = holdCredits.all({ credits: args.credits, userId: args.userId })
      if (held.length === 0) throw new Refused("credits")
    }
    insertReservation.run({
      id: args.id,
      hash: args.keyHash,
      userId: args.userId,
      amount: args.amount,
      credits: args.credits,
      now: args.now,
      instanceId: args.instanceId,
      bootId: args.bootId,
      leaseUntil: args.leaseUntil,
    })
  })
  const settleIn = db.transaction(settlementOn(db))
  const slices = sliceStatementsOn(db)

  // Called inside `reserveAll`, each `reserveIn` is a savepoint: a refusal undoes only its own changes.
  const reserveAll = db.transaction((list: ReadonlyArray<ReserveArgs>) =>
    list.map((args): ReserveOutcome => {
      try {
        reserveIn(args)
        return "ok"
      } catch (e) {
        if (e instanceof Refused) return e.reason
        throw e
      }
    }),
  )
  return {
    reserve: (list) => reserveAll.immediate(list),
    settle: (args) => settleIn.immediate(args),
    grant: slices.grant,
    giveBack: slices.giveBack,
    close: () => db.close(),
  }
}
