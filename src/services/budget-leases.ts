/**
 * Budget leases (docs/operations.md, "Budget leases"): a limited key's requests do not each take
 * the key's row. The process takes a slice of the key's remaining budget in one conditional UPDATE
 * (src/store/budget-slices.ts: the slice is in `reserved_nano`, so the slices of all processes
 * never together pass the limit) and admits requests against it in memory (`admit`, plain code: no
 * I/O, no fiber); a request's settlement lowers the slice in the ledger writer's batch, and what it
 * held but did not spend is admissible again at once. The next slice is taken in the background
 * once half of the last is used. A slice is at most `ledger.budget_slice_requests` worst cases and
 * an eighth of what is left; when that would be fewer than four worst cases the key is near its
 * limit and its requests hold one at a time (src/services/reservations.ts; what the process still
 * held is given back first), so the bound stays one request's reservation. Slices are given back
 * when unused for `ledger.budget_slice_idle_ms`, at shutdown, and when the key changes (KeyStore's
 * change hooks: this process's PATCH or DELETE before it answers, another's through its notice).
 * Credits the same.
 *
 * The leases of this process are one `BudgetLeases` value, made once with Spend's layer; the
 * functions here take it as their first argument.
 */
import { Cause, Clock, Effect, Option } from "effect"
import { toNanoUsd } from "../domain/pricing.js"
import { limitWindowStart, nextReset } from "../domain/windows.js"
import { type GiveBackArgs, type GrantArgs, type GrantOutcome, giveBackWith, grantWith } from "../store/budget-slices.js"
import type { Reservation, SettleArgs, SliceHandle } from "../store/settlement.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { now as clockNow } from "../clock.js"
import type { KeyRow } from "./KeyStore.js"
import { reserveOwn } from "./reservations.js"
import { ALL_TIME, type HoldOptions, chargesCreditsOf, chargesKeyOf, type SpendContext } from "./spend-context.js"

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

/** A slice's row as `reconcile` reads it. */
interface SliceRow {
  readonly id: string
  readonly key_hash: string
  readonly user_id: string
  readonly amount_nano: number
  readonly credits_nano: number
}

/** This process's budget leases: one per key in use, and the retired ones with something still to give back. */
export interface BudgetLeases {
  readonly ctx: SpendContext
  /** Worst cases per slice (0: slices off, every request holds its own). */
  readonly sliceRequests: number
  readonly idleMs: number
  readonly byKey: Map<string, Lease>
  /** Retired leases with something still to give back (their requests in flight): shutdown waits for them too. */
  readonly retiring: Set<Lease>
  /** Requests admitted against slices and not yet finished (for `openReservations`). */
  admitted: number
  /** Set when an operation on slices met the database unreachable: `reconcile` runs until it succeeds. */
  reconcileDue: boolean
  reconciling: boolean
  readonly grantRow: (args: GrantArgs) => Effect.Effect<GrantOutcome>
  readonly giveBackRow: (args: GiveBackArgs) => Effect.Effect<void>
}

export const makeBudgetLeases = (ctx: SpendContext): BudgetLeases => {
  const { sql, direct, beside } = ctx
  const grantThroughSql = grantWith(sql)
  const giveBackThroughSql = giveBackWith(sql)
  return {
    ctx,
    sliceRequests: ctx.config.budgetSliceRequests,
    idleMs: ctx.config.budgetSliceIdleMs,
    byKey: new Map(),
    retiring: new Set(),
    admitted: 0,
    reconcileDue: false,
    reconciling: false,
    grantRow: (args) => (direct !== undefined ? beside(() => direct.grant(args)) : grantThroughSql(args)).pipe(Effect.orDie),
    giveBackRow: (args) => (direct !== undefined ? beside(() => direct.giveBack(args)) : giveBackThroughSql(args)).pipe(Effect.orDie),
  }
}

const newLease = (leases: BudgetLeases, key: KeyRow, nowMs: number): Lease => {
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
    creditsPool: leases.ctx.config.creditsEnforced,
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
  ;(lease as { handle: SliceHandle }).handle = { id: lease.id, release: (args) => releaseInto(leases, lease, args) }
  return lease
}

/** What a finished request held but did not spend goes back to its slice (or, retired, to the database). */
const releaseInto = (leases: BudgetLeases, lease: Lease, args: SettleArgs) => {
  const actual = Math.max(0, toNanoUsd(args.actualUsd))
  lease.keyLeft += args.amountNano - Math.min(args.amountNano, actual)
  lease.creditsLeft += args.creditsNano - Math.min(args.creditsNano, actual)
  lease.inFlight--
  leases.admitted--
  if (lease.retired) void giveBackLater(leases, lease)
}

/** Takes `k` and `c` from the lease in memory: the reservation, or undefined when they do not fit. */
const take = (leases: BudgetLeases, lease: Lease, k: number, c: number, worst: number): Reservation | undefined => {
  if (lease.retired || lease.keyLeft < k || lease.creditsLeft < c) return undefined
  lease.keyLeft -= k
  lease.creditsLeft -= c
  lease.inFlight++
  leases.admitted++
  lease.lastUsed = Date.now()
  lease.lastWorst = worst
  // Half of the last slice used: the next one is taken now, in the background.
  if (
    lease.granting === undefined &&
    lease.nearUntil <= lease.lastUsed &&
    ((lease.keyPool && lease.keyLeft < lease.lastKey / 2) || (lease.creditsPool && lease.creditsLeft < lease.lastCredits / 2))
  ) {
    void grantFor(leases, lease, worst)
  }
  return { id: lease.id, keyHash: lease.keyHash, userId: lease.userId, amountNano: k, creditsNano: c, windowStart: lease.windowStart, slice: lease.handle }
}

/**
 * The request admitted in memory against its key's slice, or undefined (no slice, it does not
 * fit, the window ended: `reserve` decides). Plain code on the request's path: no I/O, no fiber.
 */
export const admit = (leases: BudgetLeases, key: KeyRow, worstCaseUsd: number, options: HoldOptions): Reservation | undefined => {
  const lease = leases.byKey.get(key.hash)
  if (lease === undefined || clockNow() >= lease.windowEndsAt) return undefined
  const chargesKey = chargesKeyOf(key, options)
  const chargesCredits = chargesCreditsOf(leases.ctx.config, options)
  if ((chargesKey && !lease.keyPool) || (chargesCredits && !lease.creditsPool)) return undefined
  const worst = toNanoUsd(worstCaseUsd)
  return take(leases, lease, chargesKey ? worst : 0, chargesCredits ? worst : 0, worst)
}

/** Takes the lease's next slice (one at a time: a second asker waits for the same). */
const grantFor = (leases: BudgetLeases, lease: Lease, worst: number): Promise<GrantOutcome> => {
  if (lease.granting !== undefined) return lease.granting
  const { owner } = leases.ctx
  const want = Math.max(1, worst) * leases.sliceRequests
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
  const granting = leases.ctx.runPromise(leases.grantRow(args)).then(
    (outcome) => {
      lease.granting = undefined
      if (outcome.kind === "granted") {
        lease.created = true
        lease.keyLeft += outcome.key
        lease.creditsLeft += outcome.credits
        lease.lastKey = outcome.key
        lease.lastCredits = outcome.credits
        // Revoked while it was being taken: it goes back at once.
        if (lease.retired) void giveBackLater(leases, lease)
      } else if (outcome.kind === "near") lease.nearUntil = Date.now() + NEAR_RETRY_MS
      else retire(leases, lease)
      return outcome
    },
    (e: unknown) => {
      lease.granting = undefined
      if (isStoreUnavailable(e)) lostTrack(leases, lease)
      else console.error("gateway: taking a budget slice failed", e)
      return { kind: "near" } satisfies GrantOutcome as GrantOutcome
    },
  )
  lease.granting = granting
  return granting
}

/** The lease admits nothing more and leaves the map; what it holds unused goes back (now and as its requests finish). */
const retire = (leases: BudgetLeases, lease: Lease) => {
  lease.retired = true
  if (leases.byKey.get(lease.keyHash) === lease) leases.byKey.delete(lease.keyHash)
  leases.retiring.add(lease)
}

/** Gives back what a lease holds unused; the effect ends when the database has it. */
const giveBack = (leases: BudgetLeases, lease: Lease): Effect.Effect<void> =>
  Effect.suspend(() => {
    const key = lease.keyLeft
    const credits = lease.creditsLeft
    if ((key === 0 && credits === 0) || !lease.created) return Effect.void
    lease.keyLeft = 0
    lease.creditsLeft = 0
    return leases.giveBackRow({ sliceId: lease.id, keyHash: lease.keyHash, userId: lease.userId, key, credits })
  })

/**
 * Gives back what a retired lease holds unused, one give-back at a time per lease, again as its
 * requests finish; resolves once nothing is left to give (or the database refused: logged).
 */
const giveBackLater = (leases: BudgetLeases, lease: Lease): Promise<void> => {
  if (lease.giving !== undefined) return lease.giving
  if (lease.granting !== undefined) return lease.granting.then(() => giveBackLater(leases, lease))
  if (lease.keyLeft === 0 && lease.creditsLeft === 0) {
    if (lease.inFlight === 0 && !lease.uncertain) leases.retiring.delete(lease)
    return Promise.resolve()
  }
  const giving = leases.ctx.runPromise(giveBack(leases, lease)).then(
    () => {
      lease.giving = undefined
      return giveBackLater(leases, lease)
    },
    (e: unknown) => {
      lease.giving = undefined
      // Whether it was given back is unknown: once the database is back, its row is read and what it holds goes back.
      lostTrack(leases, lease)
      if (!isStoreUnavailable(e)) console.error("gateway: giving back a budget slice failed (it is given back once its row can be read)", e)
    },
  )
  lease.giving = giving
  return giving
}

/** Retires the lease of `hash` (every lease when undefined) and gives back what it held unused, before returning. */
export const revoke = (leases: BudgetLeases, hash: string | undefined): Effect.Effect<void> =>
  Effect.suspend(() => {
    const list =
      hash === undefined ? [...leases.byKey.values(), ...leases.retiring] : [leases.byKey.get(hash)].filter((l): l is Lease => l !== undefined)
    for (const lease of list) retire(leases, lease)
    return Effect.forEach(list, (lease) => Effect.promise(() => giveBackLater(leases, lease)), { discard: true })
  })

/**
 * Holds `worstCaseUsd` against the key's limit (and the user's credits when enforced):
 * against the key's budget slice when one can be had, else as a hold of its own. Fails with
 * 402 when the key's window is used up or credits cannot cover the reservation.
 */
export const reserve = (leases: BudgetLeases, key: KeyRow, worstCaseUsd: number, options: HoldOptions) =>
  Effect.gen(function* () {
    const { ctx } = leases
    const chargesKey = chargesKeyOf(key, options)
    const chargesCredits = chargesCreditsOf(ctx.config, options)
    if (!chargesKey && !chargesCredits) return Option.none<Reservation>()
    if (leases.sliceRequests === 0) return yield* reserveOwn(ctx, key, worstCaseUsd, options)
    const nowMs = yield* Clock.currentTimeMillis
    const windowStart = limitWindowStart(key.limit_reset, nowMs) ?? ALL_TIME
    const worst = toNanoUsd(worstCaseUsd)
    const k = chargesKey ? worst : 0
    const c = chargesCredits ? worst : 0
    for (let attempt = 0; attempt < 3; attempt++) {
      let lease = leases.byKey.get(key.hash)
      if (lease !== undefined && (lease.windowStart !== windowStart || (chargesKey && !lease.keyPool) || (chargesCredits && !lease.creditsPool))) {
        // A new window, or a key that changed under a missed notice: this slice is done with.
        retire(leases, lease)
        const done = lease
        yield* Effect.promise(() => giveBackLater(leases, done))
        lease = undefined
      }
      if (lease === undefined) {
        lease = newLease(leases, key, nowMs)
        leases.byKey.set(key.hash, lease)
      }
      const taken = take(leases, lease, k, c, worst)
      if (taken !== undefined) return Option.some(taken)
      if (lease.nearUntil > Date.now()) break
      const current = lease
      const outcome = yield* Effect.promise(() => grantFor(leases, current, worst))
      if (outcome.kind === "near") break
    }
    // Near the limit: what this process still holds of the key goes back, and the request holds its own.
    const lease = leases.byKey.get(key.hash)
    if (lease !== undefined && lease.granting === undefined && lease.giving === undefined) yield* giveBack(leases, lease)
    return yield* reserveOwn(ctx, key, worstCaseUsd, options)
  })

/** An unused slice goes back once its key has had no request for `idleMs`. */
const retireIdle = (leases: BudgetLeases) => {
  const now = Date.now()
  for (const lease of leases.byKey.values()) {
    if (lease.inFlight === 0 && lease.granting === undefined && now - lease.lastUsed >= leases.idleMs) {
      retire(leases, lease)
      void giveBackLater(leases, lease)
    }
  }
}

/**
 * The leases' timers: idle slices given back, and, every second while a lost connection left
 * slices to reconcile, `reconcile` (within a few seconds of the database's return). Returns what stops them.
 */
export const startTimers = (leases: BudgetLeases): (() => void) => {
  const idleCheck = setInterval(() => retireIdle(leases), Math.max(10, Math.floor(leases.idleMs / 2)))
  idleCheck.unref?.()
  const reconcileCheck = setInterval(() => {
    if (leases.reconciling || !leases.reconcileDue) return
    leases.reconciling = true
    void leases.ctx.runPromise(reconcile(leases, false)).then((done) => {
      leases.reconciling = false
      if (done) leases.reconcileDue = [...leases.retiring].some((l) => l.uncertain)
    })
  }, 1_000)
  reconcileCheck.unref?.()
  return () => {
    clearInterval(idleCheck)
    clearInterval(reconcileCheck)
  }
}

/**
 * At shutdown (after the requests in flight have finished): every slice goes back. Then, once the
 * ledger has committed their settlements, every slice row of this process goes (none stays held).
 */
export const giveBackAll = (leases: BudgetLeases) =>
  Effect.gen(function* () {
    yield* revoke(leases, undefined).pipe(
      Effect.catchAllCause((cause) => Effect.logWarning("Giving back budget slices at shutdown failed; their lease will release them", cause)),
    )
    if (!(yield* reconcile(leases, true))) yield* Effect.logWarning("Some budget slices could not be released at shutdown; their lease will release them")
  })

/** The slices whose rows this process renews now: made, and no grant of them under way. */
export const renewable = (leases: BudgetLeases): ReadonlyArray<Lease> => [...leases.byKey.values()].filter((l) => l.created && l.granting === undefined)

/** A slice among `known` whose row was not renewed (swept while this process did not renew) admits nothing more. */
export const dropUnrenewed = (leases: BudgetLeases, known: ReadonlyArray<Lease>, renewed: ReadonlySet<string>) => {
  for (const l of known) {
    if (renewed.has(l.id)) continue
    retire(leases, l)
    l.keyLeft = 0
    l.creditsLeft = 0
  }
}

/** The ids of the slices this process tracks: in use, or retired with something still to give back or settle. */
export const trackedIds = (leases: BudgetLeases): Array<string> => {
  const ids: Array<string> = []
  for (const l of leases.byKey.values()) if (l.created || l.uncertain) ids.push(l.id)
  for (const l of leases.retiring) if (l.created || l.uncertain) ids.push(l.id)
  return ids
}

const lostTrack = (leases: BudgetLeases, l: Lease) => {
  l.uncertain = true
  leases.reconcileDue = true
  retire(leases, l)
}

/**
 * After the database was unreachable: each slice row of this process is compared with what it
 * tracks. A row whose lease it still uses is re-adopted as is (memory knows what it admitted); a
 * row it lost track of, or whose lease is uncertain and has no request left in flight, gives back
 * what it still holds, whole (its row goes), once the ledger has committed every settlement queued
 * before (so nothing a request spent is given back). True when done; false: try again later.
 * With `all` (a graceful stop), every row without a request in flight goes.
 */
const reconcile = (leases: BudgetLeases, all: boolean): Effect.Effect<boolean> =>
  Effect.gen(function* () {
    const { sql, generations, owner } = leases.ctx
    const before = new Set([...leases.byKey.values(), ...leases.retiring].map((l) => l.id))
    yield* generations.caughtUp
    // The ledger's settlements not all committed yet (the database still away): later.
    if (generations.spoolStats().generations > 0) return false
    const rows = yield* sql<SliceRow>`SELECT id, key_hash, user_id, amount_nano, credits_nano FROM reservations
      WHERE boot_id = ${owner.bootId} AND is_slice = 1`
    const byId = new Map<string, Lease>()
    for (const l of [...leases.byKey.values(), ...leases.retiring]) byId.set(l.id, l)
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
      yield* leases.giveBackRow({ sliceId: row.id, keyHash: row.key_hash, userId: row.user_id, key: Number(row.amount_nano), credits: Number(row.credits_nano) })
    }
    for (const l of [...leases.retiring]) {
      if (!l.uncertain || l.inFlight > 0 || l.granting !== undefined || l.giving !== undefined) continue
      // Its row was given back above (or was never written): nothing of it is left to track.
      l.uncertain = false
      leases.retiring.delete(l)
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

/** This process's slices: what each may still admit in memory (for tests and metrics). */
export const slicesOf = (leases: BudgetLeases) =>
  [...leases.byKey.values()].map((l) => ({ id: l.id, keyHash: l.keyHash, keyLeftNano: l.keyLeft, creditsLeftNano: l.creditsLeft, inFlight: l.inFlight }))
