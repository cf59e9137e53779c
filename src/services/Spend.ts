/**
 * Spending limits and credits (docs/operations.md, "Money and holds"): reserve the worst case before the call, settle the
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
 *
 * Budget leases (docs/operations.md, "Budget leases"): a limited key's requests do not each take the key's row. The process
 * takes a slice of the key's remaining budget in one conditional UPDATE (src/store/budget-slices.ts:
 * the slice is in `reserved_nano`, so the slices of all processes never together pass the limit)
 * and admits requests against it in memory (`admit`, plain code: no I/O, no fiber); a request's
 * settlement lowers the slice in the ledger writer's batch, and what it held but did not spend is
 * admissible again at once. The next slice is taken in the background once half of the last is
 * used. A slice is at most `ledger.budget_slice_requests` worst cases and an eighth of what is
 * left; when that would be fewer than four worst cases the key is near its limit and its requests
 * hold one at a time as above (what the process still held is given back first), so the bound
 * stays one request's reservation. Slices are given back when unused for
 * `ledger.budget_slice_idle_ms`, at shutdown, and when the key changes (KeyStore's change hooks:
 * this process's PATCH or DELETE before it answers, another's through its notice). Credits the same.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Clock, Effect, Exit, Option, Runtime, Schedule } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { PaymentRequired } from "../domain/errors.js"
import { fromNanoUsd, toNanoUsd } from "../domain/pricing.js"
import { limitWindowStart, nextReset } from "../domain/windows.js"
import { type GiveBackArgs, type GrantArgs, type GrantOutcome, giveBackWith, grantWith } from "../store/budget-slices.js"
import { type Reservation, type SettleArgs, type SliceHandle, settlementWith } from "../store/settlement.js"
import { besideMain, MainConnection } from "../store/sqlite-client.js"
import { dayOf } from "../store/spend-rollup.js"
import { openSqliteSpend, type ReserveArgs, type ReserveOutcome, type SqliteSpend, whenUnlocked } from "../store/spend-sqlite.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { GenerationStore } from "./GenerationStore.js"
import { type KeyRow, KeyStore } from "./KeyStore.js"
import { now as clockNow } from "../clock.js"

export type { Reservation } from "../store/settlement.js"

const ALL_TIME = "all"

/** USD for a message: cents when whole, else up to 6 decimals (a request's reservation is often under a cent). */
const usd = (n: number): string => {
  const fixed = n.toFixed(6).replace(/0+$/, "")
  return `$${fixed.endsWith(".") ? `${fixed}00` : fixed.split(".")[1]!.length === 1 ? `${fixed}0` : fixed}`
}

const mayCost = (worstCaseUsd: number) =>
  `this request may cost up to ${usd(worstCaseUsd)} (its prompt and max_output_tokens at the dearest candidate's price)`

/** A key near its limit holds per request for this long before a slice is tried again. */
const NEAR_RETRY_MS = 1_000

/**
 * This process's budget slice of one key: what it may still admit in memory, and the requests
 * admitted against it and not yet finished. Plain fields, changed only on the event loop.
 */
interface Lease {
  /** The slice's row in `reservations`. */
  readonly id: string
  readonly keyHash: string
  readonly userId: string
  readonly windowStart: string
  readonly since: string | undefined
  /** Epoch ms at which the window ends (Infinity: all time): the lease is not used past it. */
  readonly windowEndsAt: number
  readonly includeByok: boolean
  /** It takes slices of the key's limit / of the user's credits. */
  readonly keyPool: boolean
  readonly creditsPool: boolean
  /** Nano-dollars admissible in memory. */
  keyLeft: number
  creditsLeft: number
  /** The last slice taken, for the mark at which the next is taken in the background. */
  lastKey: number
  lastCredits: number
  /** The worst case of the last request admitted: background slices are sized by it. */
  lastWorst: number
  inFlight: number
  lastUsed: number
  /** Its row exists (the first grant inserts it). */
  created: boolean
  granting: Promise<GrantOutcome> | undefined
  giving: Promise<void> | undefined
  /** Until then the key is near its limit: requests that do not fit hold their own. */
  nearUntil: number
  /** Revoked, idle or lost: admits nothing more; what its requests give back goes back to the database. */
  retired: boolean
  /**
   * A grant or give-back of it met the database unreachable: whether it took effect is unknown. The
   * lease is retired and kept (its row renewed) until its requests have finished and the ledger has
   * committed their settlements; then what its row still holds is given back whole (`reconcile`).
   */
  uncertain: boolean
  readonly handle: SliceHandle
}

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
    const keys = yield* KeyStore
    const generations = yield* GenerationStore
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
    // Their commits wait for the main connection's permit only while a transaction is open there,
    // and never for another process's write lock (`serve --workers` on one file): busy, the write
    // is tried again after a pause instead of a synchronous wait that would stall the event loop.
    const beside = whenUnlocked(besideMain(sql, yield* MainConnection))
    const runtime = yield* Effect.runtime<never>()
    // Who owns the holds this process takes: its configured name and this run of it.
    const lease = { instanceId: config.instanceId, bootId: crypto.randomUUID(), leaseMs: config.holdLeaseMs } as const
    const owner = lease

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

    /**
     * What is held, in words: requests' own holds, and budget slices that gateway processes
     * (this one or others sharing the database) keep to admit requests without a write. A slice
     * also covers the requests its process admitted until their spend is recorded, so it is named
     * as a slice, not as requests in flight (which may all have finished).
     */
    const heldWords = (heldNano: number, slicedNano: number, processes: number) => {
      const sliced = Math.min(Math.max(0, slicedNano), heldNano)
      const own = `${usd(fromNanoUsd(heldNano - sliced))} held by requests in flight`
      if (sliced === 0) return own
      const idle = `${Number((config.budgetSliceIdleMs / 1000).toFixed(3))} s`
      return (
        `${own}; ${usd(fromNanoUsd(sliced))} reserved in the budget slices of ${processes} gateway process${processes === 1 ? "" : "es"}, ` +
        `each given back after ${idle} without a request on this key, or at once when the key is changed`
      )
    }

    /** The 402 of a key whose window cannot hold the request: what it may cost, what is left and held, how to fix it. */
    const refuseKey = (key: KeyRow, nowMs: number, worstCaseUsd: number, args: ReserveArgs) =>
      Effect.gen(function* () {
        // Read after the refusal, for the message only: the figures of that moment, not a second check.
        const rows = yield* sql<{ window_start: string | null; window_spend_nano: number; reserved_nano: number; sliced: number; processes: number }>`SELECT
            window_start, window_spend_nano, reserved_nano,
            (SELECT COALESCE(SUM(amount_nano), 0) FROM reservations WHERE key_hash = ${args.keyHash} AND is_slice = 1) AS sliced,
            (SELECT COUNT(DISTINCT boot_id) FROM reservations WHERE key_hash = ${args.keyHash} AND is_slice = 1 AND amount_nano > 0) AS processes
          FROM api_keys WHERE hash = ${args.keyHash}`
        const row = rows[0]
        const heldNano = Math.max(0, Number(row?.reserved_nano ?? 0))
        const spentNano = row !== undefined && row.window_start === args.windowStart ? Number(row.window_spend_nano) : yield* ledgerWindowSpend(args)
        const limitNano = Number(key.limit_nano ?? 0)
        const limit = fromNanoUsd(limitNano)
        const left = fromNanoUsd(Math.max(0, limitNano - spentNano - heldNano))
        const reset = nextReset(key.limit_reset, nowMs)
        return new PaymentRequired({
          message:
            `This API key's spending limit cannot hold this request: ${mayCost(worstCaseUsd)}; ${usd(left)} of this key's ${usd(limit)} ${key.limit_reset ?? "total"} limit ` +
            `is left (${heldWords(heldNano, Number(row?.sliced ?? 0), Number(row?.processes ?? 0))}). Lower max_output_tokens, or raise the key's limit` +
            (reset ? `; it resets at ${reset.toISOString()}.` : "; it does not reset.") +
            " (This is the key's limit, not your account's credits.)",
        })
      })

    /** The 402 of credits that cannot hold the request, with the same figures. */
    const refuseCredits = (userId: string, worstCaseUsd: number) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ granted: number; spent: number; held: number; sliced: number; processes: number }>`SELECT
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
            `(${heldWords(heldNano, Number(row?.sliced ?? 0), Number(row?.processes ?? 0))}). Lower max_output_tokens, or add credits to continue.`,
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
    const reserveOwn = (key: KeyRow, worstCaseUsd: number, options: { readonly isByok: boolean }) =>
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


    // ------------------------------------------------------------------ budget leases

    const sliceRequests = config.budgetSliceRequests
    const idleMs = config.budgetSliceIdleMs
    const leases = new Map<string, Lease>()
    /** Retired leases with something still to give back (their requests in flight): shutdown waits for them too. */
    const retiring = new Set<Lease>()
    /** Requests admitted against slices and not yet finished (for `openReservations`). */
    let admitted = 0
    const runPromise = Runtime.runPromise(runtime)
    const grantThroughSql = grantWith(sql)
    const giveBackThroughSql = giveBackWith(sql)
    const grantRow = (args: GrantArgs): Effect.Effect<GrantOutcome> =>
      (direct !== undefined ? beside(() => direct.grant(args)) : grantThroughSql(args)).pipe(Effect.orDie)
    const giveBackRow = (args: GiveBackArgs): Effect.Effect<void> =>
      (direct !== undefined ? beside(() => direct.giveBack(args)) : giveBackThroughSql(args)).pipe(Effect.orDie)

    const newLease = (key: KeyRow, nowMs: number): Lease => {
      const since = limitWindowStart(key.limit_reset, nowMs)
      const lease: Lease = {
        id: `slice-${crypto.randomUUID()}`,
        keyHash: key.hash,
        userId: key.user_id,
        windowStart: since ?? ALL_TIME,
        since,
        windowEndsAt: nextReset(key.limit_reset, nowMs)?.getTime() ?? Number.POSITIVE_INFINITY,
        includeByok: Boolean(key.include_byok_in_limit),
        keyPool: key.limit_nano !== null,
        creditsPool: config.creditsEnforced,
        keyLeft: 0,
        creditsLeft: 0,
        lastKey: 0,
        lastCredits: 0,
        lastWorst: 0,
        inFlight: 0,
        lastUsed: Date.now(),
        created: false,
        granting: undefined,
        giving: undefined,
        nearUntil: 0,
        retired: false,
        uncertain: false,
        handle: { id: "", release: () => undefined },
      }
      // The handle a reservation carries: the ledger calls it when the request's settlement is queued.
      ;(lease as { handle: SliceHandle }).handle = { id: lease.id, release: (args) => releaseInto(lease, args) }
      return lease
    }

    /** What a finished request held but did not spend goes back to its slice (or, retired, to the database). */
    const releaseInto = (lease: Lease, args: SettleArgs) => {
      const actual = Math.max(0, toNanoUsd(args.actualUsd))
      lease.keyLeft += args.amountNano - Math.min(args.amountNano, actual)
      lease.creditsLeft += args.creditsNano - Math.min(args.creditsNano, actual)
      lease.inFlight--
      admitted--
      if (lease.retired) void giveBackLater(lease)
    }

    /** Takes `k` and `c` from the lease in memory: the reservation, or undefined when they do not fit. */
    const take = (lease: Lease, k: number, c: number, worst: number): Reservation | undefined => {
      if (lease.retired || lease.keyLeft < k || lease.creditsLeft < c) return undefined
      lease.keyLeft -= k
      lease.creditsLeft -= c
      lease.inFlight++
      admitted++
      lease.lastUsed = Date.now()
      lease.lastWorst = worst
      // Half of the last slice used: the next one is taken now, in the background.
      if (
        lease.granting === undefined &&
        lease.nearUntil <= lease.lastUsed &&
        ((lease.keyPool && lease.keyLeft < lease.lastKey / 2) || (lease.creditsPool && lease.creditsLeft < lease.lastCredits / 2))
      ) {
        void grantFor(lease, worst)
      }
      return { id: lease.id, keyHash: lease.keyHash, userId: lease.userId, amountNano: k, creditsNano: c, windowStart: lease.windowStart, slice: lease.handle }
    }

    /**
     * The request admitted in memory against its key's slice, or undefined (no slice, it does not
     * fit, the window ended: `reserve` decides). Plain code on the request's path: no I/O, no fiber.
     */
    const admit = (key: KeyRow, worstCaseUsd: number, options: { readonly isByok: boolean }): Reservation | undefined => {
      const lease = leases.get(key.hash)
      if (lease === undefined || clockNow() >= lease.windowEndsAt) return undefined
      const chargesKey = chargesKeyOf(key, options)
      const chargesCredits = chargesCreditsOf(options)
      if ((chargesKey && !lease.keyPool) || (chargesCredits && !lease.creditsPool)) return undefined
      const worst = toNanoUsd(worstCaseUsd)
      return take(lease, chargesKey ? worst : 0, chargesCredits ? worst : 0, worst)
    }

    /** Takes the lease's next slice (one at a time: a second asker waits for the same). */
    const grantFor = (lease: Lease, worst: number): Promise<GrantOutcome> => {
      if (lease.granting !== undefined) return lease.granting
      const want = Math.max(1, worst) * sliceRequests
      const args: GrantArgs = {
        sliceId: lease.id,
        create: !lease.created,
        keyHash: lease.keyHash,
        userId: lease.userId,
        chargesKey: lease.keyPool,
        chargesCredits: lease.creditsPool,
        windowStart: lease.windowStart,
        since: lease.since,
        includeByok: lease.includeByok,
        worstNano: worst,
        wantNano: want,
        now: new Date().toISOString(),
        instanceId: owner.instanceId,
        bootId: owner.bootId,
        leaseUntil: Date.now() + owner.leaseMs,
      }
      const granting = runPromise(grantRow(args)).then(
        (outcome) => {
          lease.granting = undefined
          if (outcome.kind === "granted") {
            lease.created = true
            lease.keyLeft += outcome.key
            lease.creditsLeft += outcome.credits
            lease.lastKey = outcome.key
            lease.lastCredits = outcome.credits
            // Revoked while it was being taken: it goes back at once.
            if (lease.retired) void giveBackLater(lease)
          } else if (outcome.kind === "near") lease.nearUntil = Date.now() + NEAR_RETRY_MS
          else retire(lease)
          return outcome
        },
        (e: unknown) => {
          lease.granting = undefined
          if (isStoreUnavailable(e)) lostTrack(lease)
          else console.error("gateway: taking a budget slice failed", e)
          return { kind: "near" } satisfies GrantOutcome as GrantOutcome
        },
      )
      lease.granting = granting
      return granting
    }

    /** The lease admits nothing more and leaves the map; what it holds unused goes back (now and as its requests finish). */
    const retire = (lease: Lease) => {
      lease.retired = true
      if (leases.get(lease.keyHash) === lease) leases.delete(lease.keyHash)
      retiring.add(lease)
    }

    /** Gives back what a lease holds unused; the effect ends when the database has it. */
    const giveBack = (lease: Lease): Effect.Effect<void> =>
      Effect.suspend(() => {
        const key = lease.keyLeft
        const credits = lease.creditsLeft
        if ((key === 0 && credits === 0) || !lease.created) return Effect.void
        lease.keyLeft = 0
        lease.creditsLeft = 0
        return giveBackRow({ sliceId: lease.id, keyHash: lease.keyHash, userId: lease.userId, key, credits })
      })

    /**
     * Gives back what a retired lease holds unused, one give-back at a time per lease, again as its
     * requests finish; resolves once nothing is left to give (or the database refused: logged).
     */
    const giveBackLater = (lease: Lease): Promise<void> => {
      if (lease.giving !== undefined) return lease.giving
      if (lease.granting !== undefined) return lease.granting.then(() => giveBackLater(lease))
      if (lease.keyLeft === 0 && lease.creditsLeft === 0) {
        if (lease.inFlight === 0 && !lease.uncertain) retiring.delete(lease)
        return Promise.resolve()
      }
      const giving = runPromise(giveBack(lease)).then(
        () => {
          lease.giving = undefined
          return giveBackLater(lease)
        },
        (e: unknown) => {
          lease.giving = undefined
          // Whether it was given back is unknown: once the database is back, its row is read and what it holds goes back.
          lostTrack(lease)
          if (!isStoreUnavailable(e)) console.error("gateway: giving back a budget slice failed (it is given back once its row can be read)", e)
        },
      )
      lease.giving = giving
      return giving
    }

    /** Retires the lease of `hash` (every lease when undefined) and gives back what it held unused, before returning. */
    const revoke = (hash: string | undefined): Effect.Effect<void> =>
      Effect.suspend(() => {
        const list = hash === undefined ? [...leases.values(), ...retiring] : [leases.get(hash)].filter((l): l is Lease => l !== undefined)
        for (const lease of list) retire(lease)
        return Effect.forEach(list, (lease) => Effect.promise(() => giveBackLater(lease)), { discard: true })
      })
    // A key's change (its limit, its window policy, a disable, a delete) revokes its slice here at once.
    keys.onChanged(revoke)

    /**
     * Holds `worstCaseUsd` against the key's limit (and the user's credits when enforced):
     * against the key's budget slice when one can be had, else as a hold of its own. Fails with
     * 402 when the key's window is used up or credits cannot cover the reservation.
     */
    const reserve = (key: KeyRow, worstCaseUsd: number, options: { readonly isByok: boolean }) =>
      Effect.gen(function* () {
        const chargesKey = chargesKeyOf(key, options)
        const chargesCredits = chargesCreditsOf(options)
        if (!chargesKey && !chargesCredits) return Option.none<Reservation>()
        if (sliceRequests === 0) return yield* reserveOwn(key, worstCaseUsd, options)
        const nowMs = yield* Clock.currentTimeMillis
        const windowStart = limitWindowStart(key.limit_reset, nowMs) ?? ALL_TIME
        const worst = toNanoUsd(worstCaseUsd)
        const k = chargesKey ? worst : 0
        const c = chargesCredits ? worst : 0
        for (let attempt = 0; attempt < 3; attempt++) {
          let lease = leases.get(key.hash)
          if (lease !== undefined && (lease.windowStart !== windowStart || (chargesKey && !lease.keyPool) || (chargesCredits && !lease.creditsPool))) {
            // A new window, or a key that changed under a missed notice: this slice is done with.
            retire(lease)
            const done = lease
            yield* Effect.promise(() => giveBackLater(done))
            lease = undefined
          }
          if (lease === undefined) {
            lease = newLease(key, nowMs)
            leases.set(key.hash, lease)
          }
          const taken = take(lease, k, c, worst)
          if (taken !== undefined) return Option.some(taken)
          if (lease.nearUntil > Date.now()) break
          const current = lease
          const outcome = yield* Effect.promise(() => grantFor(current, worst))
          if (outcome.kind === "near") break
        }
        // Near the limit: what this process still holds of the key goes back, and the request holds its own.
        const lease = leases.get(key.hash)
        if (lease !== undefined && lease.granting === undefined && lease.giving === undefined) yield* giveBack(lease)
        return yield* reserveOwn(key, worstCaseUsd, options)
      })

    // An unused slice goes back once its key has had no request for `idleMs`.
    const idleCheck = setInterval(
      () => {
        const now = Date.now()
        for (const lease of leases.values()) {
          if (lease.inFlight === 0 && lease.granting === undefined && now - lease.lastUsed >= idleMs) {
            retire(lease)
            void giveBackLater(lease)
          }
        }
      },
      Math.max(10, Math.floor(idleMs / 2)),
    )
    idleCheck.unref?.()
    // At shutdown (after the requests in flight have finished): every slice goes back.
    // Then, once the ledger has committed their settlements, every slice row of this process goes (none stays held).
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        clearInterval(idleCheck)
        clearInterval(reconcileCheck)
        yield* revoke(undefined).pipe(
          Effect.catchAllCause((cause) => Effect.logWarning("Giving back budget slices at shutdown failed; their lease will release them", cause)),
        )
        if (!(yield* reconcile(true))) yield* Effect.logWarning("Some budget slices could not be released at shutdown; their lease will release them")
      }),
    )

    /** Releases the reservation and counts the actual spend into the key's window. Idempotent. */
    const settle = (reservation: Reservation, actualUsd: number) =>
      Effect.suspend(() => {
        const args: SettleArgs = { ...reservation, actualUsd }
        // Admitted against a slice: what it did not spend is admissible again at once.
        reservation.slice?.release(args)
        return direct !== undefined ? beside(() => direct.settle(args)).pipe(Effect.orDie) : settleThroughSql(args)
      })

    const settleThroughSql = (args: SettleArgs) => sql.withTransaction(settlementWith(sql)(args)).pipe(Effect.orDie)

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

    /**
     * Renews the lease of every hold and slice of this process: one statement, whatever their
     * number. A slice whose row is gone (swept while this process did not renew) admits nothing more.
     */
    const renewLeases = Effect.suspend(() => {
      const known = [...leases.values()].filter((l) => l.created && l.granting === undefined)
      // Only the slices this process tracks (a slice it lost track of is released by `reconcile`, or by
      // its lease running out), and every hold of a request of its own.
      const tracked = trackedIds()
      const slices = tracked.length === 0 ? sql`is_slice = 0` : sql`(is_slice = 0 OR ${sql.in("id", tracked)})`
      return sql<{ id: string }>`UPDATE reservations SET lease_until = ${Date.now() + lease.leaseMs}
        WHERE boot_id = ${lease.bootId} AND ${slices} RETURNING id`.pipe(
        Effect.tap((rows) => {
          const renewed = new Set(rows.map((r) => r.id))
          for (const l of known) {
            if (renewed.has(l.id)) continue
            retire(l)
            l.keyLeft = 0
            l.creditsLeft = 0
          }
        }),
      )
    }).pipe(Effect.asVoid, Effect.orDie)

    // ------------------------------------------------------------------ after a lost connection

    /** The ids of the slices this process tracks: in use, or retired with something still to give back or settle. */
    const trackedIds = (): Array<string> => {
      const ids: Array<string> = []
      for (const l of leases.values()) if (l.created || l.uncertain) ids.push(l.id)
      for (const l of retiring) if (l.created || l.uncertain) ids.push(l.id)
      return ids
    }
    /** Set when an operation on slices met the database unreachable: `reconcile` runs until it succeeds. */
    let reconcileDue = false
    const lostTrack = (l: Lease) => {
      l.uncertain = true
      reconcileDue = true
      retire(l)
    }

    /**
     * After the database was unreachable: each slice row of this process is compared with what it
     * tracks. A row whose lease it still uses is re-adopted as is (memory knows what it admitted); a
     * row it lost track of, or whose lease is uncertain and has no request left in flight, gives back
     * what it still holds, whole (its row goes), once the ledger has committed every settlement queued
     * before (so nothing a request spent is given back). True when done; false: try again later.
     * With `all` (a graceful stop), every row without a request in flight goes.
     */
    const reconcile = (all: boolean): Effect.Effect<boolean> =>
      Effect.gen(function* () {
        const before = new Set([...leases.values(), ...retiring].map((l) => l.id))
        yield* generations.caughtUp
        // The ledger's settlements not all committed yet (the database still away): later.
        if (generations.spoolStats().generations > 0) return false
        const rows = yield* sql<HoldRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
          WHERE boot_id = ${lease.bootId} AND is_slice = 1`
        const byId = new Map<string, Lease>()
        for (const l of [...leases.values(), ...retiring]) byId.set(l.id, l)
        let settled = true
        for (const row of rows) {
          const l = byId.get(row.id)
          if (l === undefined ? before.has(row.id) : !(all || l.uncertain)) continue
          if (l !== undefined && (l.inFlight > 0 || l.granting !== undefined || l.giving !== undefined)) {
            settled = false
            continue
          }
          if (l !== undefined) {
            l.keyLeft = 0
            l.creditsLeft = 0
          }
          yield* giveBackRow({ sliceId: row.id, keyHash: row.key_hash, userId: row.user_id, key: Number(row.amount_nano), credits: Number(row.credits_nano) })
        }
        for (const l of [...retiring]) {
          if (!l.uncertain || l.inFlight > 0 || l.granting !== undefined || l.giving !== undefined) continue
          // Its row was given back above (or was never written): nothing of it is left to track.
          l.uncertain = false
          retiring.delete(l)
        }
        return settled
      }).pipe(
        Effect.catchAllCause((cause) =>
          Effect.as(
            isStoreUnavailable(Cause.squash(cause)) ? Effect.void : Effect.logWarning("Reconciling budget slices failed; trying again", cause),
            false,
          ),
        ),
      )

    // Every second while a lost connection left slices to reconcile: within a few seconds of the database's return.
    let reconciling = false
    const reconcileCheck = setInterval(() => {
      if (reconciling || !reconcileDue) return
      reconciling = true
      void runPromise(reconcile(false)).then((done) => {
        reconciling = false
        if (done) reconcileDue = [...retiring].some((l) => l.uncertain)
      })
    }, 1_000)
    reconcileCheck.unref?.()

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
      Effect.catchAllCause((cause) => {
        if (!isStoreUnavailable(Cause.squash(cause))) return Effect.logWarning("Renewing or sweeping hold leases failed; trying again next period", cause)
        // The connection was lost: the slices are reconciled with their rows once it is back.
        reconcileDue = true
        return Effect.void
      }),
      Effect.repeat(Schedule.spaced(Math.max(100, Math.floor(lease.leaseMs / 3)))),
      Effect.delay(Math.max(100, Math.floor(lease.leaseMs / 3))),
      Effect.forkScoped,
    )

    /** Requests holding something (their own hold, or admitted against a slice), for tests and metrics. */
    const openReservations = sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations WHERE is_slice = 0`.pipe(
      Effect.map((r) => Number(r[0]?.n ?? 0) + admitted),
      Effect.orDie,
    )

    /** This process's slices: what each may still admit in memory (for tests and metrics). */
    const slices = () =>
      [...leases.values()].map((l) => ({ id: l.id, keyHash: l.keyHash, keyLeftNano: l.keyLeft, creditsLeftNano: l.creditsLeft, inFlight: l.inFlight }))

    return { holds, admit, reserve, settle, revoke, slices, lease, renewLeases, sweepExpired, releaseOrphans, openReservations } as const
  }),
}) {}
