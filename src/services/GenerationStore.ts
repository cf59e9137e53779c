/**
 * Generation records, their stored content, and their spend rows, written by group commit
 * (docs/operations.md, "Ledger durability"): `record` only appends to an in-memory queue (no I/O on the request's path);
 * the writer commits the queue in ONE transaction every `windowMs` or every `maxBatch` rows,
 * whichever comes first. The writer is plain code on a timer (a fiber woken per window cost
 * more than the rows it wrote); on a SQLite file it writes with prepared statements on its own
 * connection (src/store/ledger.ts), never between a read and a write of a transaction on the
 * main connection (src/store/sqlite-client.ts). The layer's finalizer flushes what is queued,
 * so a clean shutdown loses nothing. A failed flush is retried once; if it fails again the rows are
 * written one by one, so one bad row cannot take its batch down, and a row that still fails
 * is logged with its id. A busy SQLite database (another process holds the write lock) is
 * waited out, not counted as a failure. With `ledger.durable_answers` there is no window: a commit
 * starts as soon as something is queued and the previous commit has ended (the answers wait for it).
 *
 * A batch the database cannot take (unreachable, a lost connection, a commit that does not end within
 * `ledger.commit_timeout_ms`, a SQLite file that is full or read-only) goes to the ledger spool
 * (src/store/spool.ts) with its settlements and its hooks' rows, and so does every batch after it
 * until the spool is drained: the spool is committed in order, exactly once (a batch whose rows are
 * found already written is skipped), as soon as the database takes writes again. Nothing of this
 * runs while the database takes every batch (docs/operations.md, "When the database goes away").
 */
import { SqlClient } from "@effect/sql"
import { Cause, Context, Effect, Exit, Option, Runtime } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import type { GenerationContent, GenerationEntry } from "../domain/generations.js"
import {
  fromRow,
  type GenerationRow,
  isBusy,
  type LedgerItem,
  type LedgerRows,
  openSqliteBatchWriter,
  sqlBatchWriter,
  sqlSettleAlone,
} from "../store/ledger.js"
import type { SettleArgs } from "../store/settlement.js"
import { adoptSpools, type LedgerSpool, openSpool, type SpooledBatch, spoolPathOf } from "../store/spool.js"
import { adoptedSpoolIds } from "./worker-channel.js"
import { describeStoreFailure, isStoreUnavailable, StoreTimeout } from "../store/unavailable.js"
import { MainConnection } from "../store/sqlite-client.js"
import { writerOut } from "../store/sqlite-gate.js"
import { LedgerHooks } from "./LedgerHooks.js"

export type { GenerationContent, GenerationEntry, StoredGeneration } from "../domain/generations.js"
export { newGenerationId } from "../domain/generations.js"

/** Tuning of the group-commit writer (tests shorten or stretch the window). */
export interface GenerationWriterSettings {
  /** Longest a queued row waits before its batch is flushed. */
  readonly windowMs: number
  /** A batch is flushed at once when it reaches this many rows (and never holds more). */
  readonly maxBatch: number
  /** Pause before the one retry of a failed flush. */
  readonly retryDelayMs: number
}

export class GenerationWriterOptions extends Context.Reference<GenerationWriterOptions>()("GenerationWriterOptions", {
  // 25 ms: each commit costs its BEGIN/COMMIT and WAL writes whatever it holds; at one connection
  // (~1,300 streams/s, ~3,600 JSON answers/s here) a 5 ms window gave batches of 5-20 rows, and
  // the commits were ~10 % of the gateway's CPU (A/B of the binary: streams 2.58 -> 2.35 us per
  // event, JSON c=1 214 -> 191 us per request). A read over HTTP that needs a record still
  // queued has the queue written first (`written`, `caughtUp`), so the window is never visible.
  // 1,000 rows at most: a commit's fixed pages (each B-tree's last leaf, its parents, the WAL's
  // commit frame) are written once for more rows. At JSON c=32 (~17,000 a second, ~430 rows a
  // window) 200 split each window in three: A/B of the binary against 200, json-c32 -2.5 %
  // paired (floor -0.3 %).
  defaultValue: (): GenerationWriterSettings => ({ windowMs: 25, maxBatch: 1000, retryDelayMs: 50 }),
}) {}

/** Counters of the writer, for metrics and tests. */
export interface WriterStats {
  /** Transactions committed. */
  readonly flushes: number
  /** Generation rows committed. */
  readonly rowsWritten: number
  /** Batches that failed twice and fell back to row-by-row writes. */
  readonly failedBatches: number
  /** Rows that could not be written at all (each logged with its id). */
  readonly failedRows: number
  /** Generation rows put in the spool because the database could not take them. */
  readonly spooledRows: number
  /** Spooled generation rows committed since (or found already committed). */
  readonly replayedRows: number
}

/** What the spool holds, for `/metrics` and `/v1/ready`. */
export interface SpoolStats {
  readonly generations: number
  readonly bytes: number
  /** Seconds since its oldest batch was spooled (0 when empty). */
  readonly ageSeconds: number
  /** At its bound: new requests are refused (503) until it drains. */
  readonly full: boolean
}

/** Read on the request path as one property: set when the spool reaches its bound, cleared when it is back under. */
export interface Admission {
  full: boolean
}

interface Pending {
  readonly entry?: GenerationEntry
  /** Settled in the transaction that writes `entry`. */
  readonly settlement?: SettleArgs
  /** Called once the batch holding this item is committed or spooled (true), or given up on (false). */
  readonly done?: (kept: boolean) => void
  /** A flush request: do not wait for the window. */
  readonly urgent?: boolean
}

/** A ledger hook could not read the store (an outage): the batch's hook rows are made when it is committed. */
class StoreAway {
  constructor(readonly cause: unknown) {}
}

/** How long a busy SQLite database is waited out before the batch counts as failed (at most the commit timeout). */
const BUSY_RETRY_MS = 5
const BUSY_GIVE_UP_MS = 10_000
/** Spooled generations committed in one transaction when the database is back. */
const REPLAY_ROWS = 2_000
/** Pauses between attempts to commit the spool while the database is away (doubling, to once a second). */
const REPLAY_FIRST_PAUSE_MS = 100
const REPLAY_LONGEST_PAUSE_MS = 1_000
/** No failure for this long: the outage is over (its end is logged, and the next failure is logged again). */
const OUTAGE_QUIET_MS = 5_000
const NOTHING_LOST: ReadonlySet<string> = new Set()

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export class GenerationStore extends Effect.Service<GenerationStore>()("GenerationStore", {
  // long: the service's layer body, one closure by design: the group-commit writer's queue, timers, prepared statements and spool live in its scope (Effect.Service)
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const config = yield* GatewayConfig
    const options = yield* GenerationWriterOptions
    const hooks = yield* LedgerHooks
    const runtime = yield* Effect.runtime<never>()
    const runPromiseExit = Runtime.runPromiseExit(runtime)
    const log = (effect: Effect.Effect<void>) => Runtime.runFork(runtime)(effect)
    const maxBatch = Math.max(1, options.maxBatch)
    // ledger.durable_answers: answers wait for their commit, so the writer never waits for a window;
    // it commits whatever is queued as soon as the previous commit ends (group commit, no timer).
    const eager = config.durableAnswers

    // A SQLite file gets the prepared-statement writer; Postgres and an in-memory SQLite (one
    // connection is the whole database) write through @effect/sql.
    const url = config.databaseUrl
    const sqlite = isPostgresUrl(url) || url === ":memory:" ? undefined : openSqliteBatchWriter(url)
    // The SQLite commit must not land between a read and a write of a transaction on the main
    // connection (that write would fail, SQLITE_BUSY_SNAPSHOT, no busy wait): when one is open it
    // waits for the main connection's transaction permit; when none is, it runs at once, a plain
    // call with no fiber (src/store/sqlite-client.ts).
    const main = yield* MainConnection
    const writeRows = sqlBatchWriter(sql)
    const settleRow = sqlSettleAlone(sql)
    const settled = (exit: Exit.Exit<void, unknown>) => {
      if (Exit.isFailure(exit)) throw Cause.squash(exit.cause)
    }
    /** `write` now when the main connection is idle, else inside its permit; rejects with what it threw. */
    const besideMainNow = (write: () => void): Promise<void> => {
      // The delivery Worker writing (src/store/sqlite-gate.ts): after it, not a busy try and a pause.
      const out = main.gate === undefined ? undefined : writerOut(main.gate)
      if (out !== undefined) return out.then(() => besideMainNow(write))
      if (!main.idle()) return runPromiseExit(sql.withTransaction(Effect.sync(write))).then(settled)
      try {
        write()
        return Promise.resolve()
      } catch (e) {
        return Promise.reject(e)
      }
    }
    const commitTimeoutMs = config.commitTimeoutMs
    /** A promise that rejects with StoreTimeout when `p` has not settled in time (a stalled connection). */
    const inTime = <A>(p: Promise<A>): Promise<A> =>
      new Promise<A>((resolve, reject) => {
        const timer = setTimeout(() => reject(new StoreTimeout(commitTimeoutMs)), commitTimeoutMs)
        p.then(
          (a) => {
            clearTimeout(timer)
            resolve(a)
          },
          (e: unknown) => {
            clearTimeout(timer)
            reject(e)
          },
        )
      })
    const writeBatch = (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows>): Promise<void> =>
      sqlite === undefined
        ? inTime(runPromiseExit(writeRows(items, extra)).then(settled))
        : besideMainNow(() => sqlite.write(items, extra))
    /**
     * The hooks' rows for a batch (the broadcast outbox); a hook that fails adds nothing rather than
     * losing the batch. A hook that could not read the store (an outage) makes no rows yet: the
     * batch is spooled with its hooks still to ask, and they are asked again when it is committed.
     */
    const extraRows = async (items: ReadonlyArray<LedgerItem>): Promise<ReadonlyArray<LedgerRows> | StoreAway> => {
      try {
        return await hooks.rowsFor(items.map((i) => i.entry))
      } catch (e) {
        if (isStoreUnavailable(e)) return new StoreAway(e)
        log(Effect.logError("A ledger hook failed; the batch is written without its rows", describeStoreFailure(e)))
        return []
      }
    }
    /** A spooled batch's hook rows: stored, or made now (the store was away when it was spooled). */
    const spooledExtra = async (b: SpooledBatch): Promise<ReadonlyArray<LedgerRows>> => {
      if (b.extra !== undefined) return b.extra
      const made = await extraRows(b.items)
      if (made instanceof StoreAway) throw made.cause
      return made
    }
    /** A settlement whose row could not be written, alone: the hold is released all the same. */
    const settleAlone = (settlement: SettleArgs): Promise<void> =>
      sqlite === undefined ? runPromiseExit(settleRow(settlement)).then(settled) : besideMainNow(() => sqlite.settle(settlement))

    // The queue is a plain array: `record` is one push, no fiber, no I/O.
    const pending: Array<Pending> = []
    let queuedEntries = 0
    let urgentQueued = 0
    /** Set once the final flush has run: nothing would write a row queued after it. */
    let closed = false
    let committing = false
    /** The batch being committed (out of `pending`, not yet written). */
    let inCommit: ReadonlyArray<Pending> = []
    let timer: ReturnType<typeof setTimeout> | undefined
    let immediate: ReturnType<typeof setImmediate> | undefined
    const stats = { flushes: 0, rowsWritten: 0, failedBatches: 0, failedRows: 0, spooledRows: 0, replayedRows: 0 }

    // The spool: memory only for an in-memory database (a restart loses it anyway), else a file of this
    // instance's own under the data folder, read now: what it holds is committed before the gateway serves.
    const spoolPath = url === ":memory:" ? undefined : spoolPathOf(config.dataDir, config.instanceId)
    const spool: LedgerSpool = openSpool(spoolPath, { maxGenerations: config.spoolMaxGenerations, maxBytes: config.spoolMaxBytes })
    const admission: Admission = { full: false }
    const spoolChanged = () => {
      admission.full = spool.full()
    }
    spoolChanged()

    // "database unreachable" once per outage: logged at the first failure, its end once none came for a while.
    let outageSince: number | undefined
    let lastUnavailable = 0
    let unavailableSeen = 0
    let outageTimer: ReturnType<typeof setInterval> | undefined
    const unavailable = (where: string, e: unknown) => {
      lastUnavailable = Date.now()
      unavailableSeen++
      if (outageSince !== undefined) return
      outageSince = lastUnavailable
      unavailableSeen = 1
      log(Effect.logError(`database unreachable (${where}); answered generations go to the ledger spool, requests that need the database get 503`, describeStoreFailure(e)))
      outageTimer = setInterval(() => {
        if (Date.now() - lastUnavailable < OUTAGE_QUIET_MS || outageSince === undefined) return
        clearInterval(outageTimer)
        outageTimer = undefined
        log(Effect.logWarning(`database reachable again after ${((lastUnavailable - outageSince) / 1000).toFixed(1)} s (${unavailableSeen} failures)`))
        outageSince = undefined
      }, 1_000)
      outageTimer.unref?.()
    }


    /** Starts the next commit: at once when a batch is full or a flush was asked for, else when the window closes. */
    const wake = () => {
      if (committing || pending.length === 0 || immediate !== undefined) return
      if (eager || urgentQueued > 0 || pending.length >= maxBatch) {
        if (timer !== undefined) clearTimeout(timer)
        timer = undefined
        immediate = setImmediate(commitNext)
      } else if (timer === undefined) {
        timer = setTimeout(commitNext, options.windowMs)
      }
    }

    /** False when the store has shut down (the caller logs the loss). */
    const enqueue = (item: Pending): boolean => {
      if (closed) return false
      pending.push(item)
      if (item.entry !== undefined) queuedEntries++
      if (item.urgent) urgentQueued++
      wake()
      return true
    }

    /** One transaction; a busy database is waited out. The failure (undefined once committed), and the hooks' rows it carried. */
    const attempt = async (
      items: ReadonlyArray<LedgerItem>,
      withHooks = true,
    ): Promise<{ readonly failure: unknown; readonly extra: ReadonlyArray<LedgerRows> | undefined }> => {
      const giveUpAt = Date.now() + Math.min(BUSY_GIVE_UP_MS, commitTimeoutMs)
      const extra = withHooks ? await extraRows(items) : []
      if (extra instanceof StoreAway) return { failure: extra.cause, extra: undefined }
      for (;;) {
        try {
          await writeBatch(items, extra)
          stats.flushes++
          stats.rowsWritten += items.length
          return { failure: undefined, extra }
        } catch (e) {
          if (!isBusy(e) || Date.now() >= giveUpAt) return { failure: e ?? new Error("the batch failed"), extra }
          await sleep(BUSY_RETRY_MS)
        }
      }
    }

    /**
     * Puts a batch the database cannot take in the spool; the ids it could not keep either (the
     * spool's file refused it: a full or read-only disk), each logged.
     */
    const toSpool = async (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows> | undefined): Promise<ReadonlySet<string>> => {
      try {
        await spool.append(items, extra)
        stats.spooledRows += items.length
        spoolChanged()
        replaySoon()
        return NOTHING_LOST
      } catch (e) {
        stats.failedRows += items.length
        for (const { entry } of items) {
          log(
            Effect.logError(
              `Generation ${entry.id} (key ${entry.keyHash.slice(0, 8)}…, $${entry.totalCost}) could not be written nor spooled`,
              describeStoreFailure(e),
            ),
          )
        }
        return new Set(items.map((i) => i.entry.id))
      }
    }

    /**
     * Writes a batch: once, again after a pause, then row by row; never throws. A batch the database
     * cannot take goes to the spool (and so does every batch while the spool holds any). Returns the
     * ids of the rows neither written nor spooled.
     */
    const commit = async (items: ReadonlyArray<LedgerItem>): Promise<ReadonlySet<string>> => {
      if (items.length === 0) return NOTHING_LOST
      // In order: while the spool holds batches, what comes after them waits behind them.
      if (spool.busy()) {
        const extra = await extraRows(items)
        return toSpool(items, extra instanceof StoreAway ? undefined : extra)
      }
      const first = await attempt(items)
      if (first.failure === undefined) return NOTHING_LOST
      if (isStoreUnavailable(first.failure)) {
        unavailable("committing generations", first.failure)
        return toSpool(items, first.extra)
      }
      await sleep(options.retryDelayMs)
      const second = await attempt(items)
      if (second.failure === undefined) return NOTHING_LOST
      if (isStoreUnavailable(second.failure)) {
        unavailable("committing generations", second.failure)
        return toSpool(items, second.extra)
      }
      stats.failedBatches++
      log(
        Effect.logWarning(
          `A batch of ${items.length} generation rows failed twice; writing them one by one`,
          describeStoreFailure(second.failure),
        ),
      )
      const lost = new Set<string>()
      for (const item of items) {
        let { failure: rowFailure, extra } = await attempt([item])
        if (rowFailure !== undefined && !isStoreUnavailable(rowFailure) && (await attempt([item], false)).failure === undefined) {
          // The hooks' rows (the broadcast outbox) were what failed: the record is kept without them.
          log(Effect.logWarning(`Generation ${item.entry.id} was written without its ledger hooks' rows`, describeStoreFailure(rowFailure)))
          rowFailure = undefined
        }
        if (rowFailure === undefined) continue
        if (isStoreUnavailable(rowFailure)) {
          unavailable("committing generations", rowFailure)
          for (const id of await toSpool([item], extra)) lost.add(id)
          continue
        }
        lost.add(item.entry.id)
        await giveUp(item, rowFailure)
      }
      return lost
    }

    /** A row that cannot be written at all (a wrong row, not an outage): logged, its hold settled alone. */
    const giveUp = async (item: LedgerItem, failure: unknown) => {
      const entry = item.entry
      stats.failedRows++
      log(
        Effect.logError(
          `Generation ${entry.id} (key ${entry.keyHash.slice(0, 8)}…, $${entry.totalCost}) could not be written`,
          describeStoreFailure(failure),
        ),
      )
      if (item.settlement !== undefined) {
        await settleAlone(item.settlement).catch((e: unknown) =>
          log(Effect.logError(`The reservation of generation ${entry.id} could not be settled`, describeStoreFailure(e))),
        )
      }
    }

    // ------------------------------------------------------------------ replaying the spool

    /** The ids among `ids` already in `generations` (a spooled batch whose first commit did reach the database). */
    const alreadyWritten = (ids: ReadonlyArray<string>): Promise<Set<string>> =>
      ids.length === 0
        ? Promise.resolve(new Set())
        : inTime(
            runPromiseExit(sql<{ id: string }>`SELECT id FROM generations WHERE ${sql.in("id", ids as Array<string>)}`).then((exit) => {
              if (Exit.isFailure(exit)) throw Cause.squash(exit.cause)
              return new Set(exit.value.map((r) => r.id))
            }),
          )

    /**
     * Commits the oldest spooled batches in one transaction, skipping those already written (a
     * batch is one transaction: its first row written means all of it was). True when they left
     * the spool; false when the database is still away (try again later).
     */
    const replayStep = async (): Promise<boolean> => {
      const all = spool.batches()
      const chunk: Array<SpooledBatch> = []
      let rows = 0
      for (const b of all) {
        if (chunk.length > 0 && rows + b.items.length > REPLAY_ROWS) break
        chunk.push(b)
        rows += b.items.length
      }
      if (chunk.length === 0) return true
      try {
        const written = await alreadyWritten(chunk.flatMap((b) => (b.items[0] === undefined ? [] : [b.items[0].entry.id])))
        const todo = chunk.filter((b) => b.items[0] !== undefined && !written.has(b.items[0].entry.id))
        if (todo.length > 0) {
          const items = todo.flatMap((b) => b.items)
          const extra: Array<LedgerRows> = []
          for (const b of todo) extra.push(...(await spooledExtra(b)))
          const failure = await writeSpooled(items, extra)
          if (failure !== undefined) {
            if (isStoreUnavailable(failure)) {
              unavailable("committing the ledger spool", failure)
              return false
            }
            // A wrong row among them (not an outage): batch by batch, then row by row, so one cannot hold the rest back.
            for (const b of todo) await replayAlone(b)
          }
        }
        stats.replayedRows += rows
        await spool.committed(chunk.length)
        spoolChanged()
        return true
      } catch (e) {
        if (isStoreUnavailable(e)) {
          unavailable("committing the ledger spool", e)
          return false
        }
        throw e
      }
    }

    /** One transaction of spooled rows with their stored hooks' rows; the failure, or undefined once committed. */
    const writeSpooled = async (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows>): Promise<unknown> => {
      const giveUpAt = Date.now() + Math.min(BUSY_GIVE_UP_MS, commitTimeoutMs)
      for (;;) {
        try {
          await writeBatch(items, extra)
          stats.flushes++
          stats.rowsWritten += items.length
          return undefined
        } catch (e) {
          if (!isBusy(e) || Date.now() >= giveUpAt) return e ?? new Error("the batch failed")
          await sleep(BUSY_RETRY_MS)
        }
      }
    }

    /** A spooled batch alone after its chunk failed for a wrong row; throws (an outage) to be tried again later. */
    const replayAlone = async (b: SpooledBatch) => {
      const extra = await spooledExtra(b)
      const failure = await writeSpooled(b.items, extra)
      if (failure === undefined) return
      if (isStoreUnavailable(failure)) throw failure
      for (const item of b.items) {
        let rowFailure = await writeSpooled([item], extra.length > 0 && b.items.length === 1 ? extra : [])
        if (rowFailure === undefined) continue
        if (isStoreUnavailable(rowFailure)) throw rowFailure
        // Written meanwhile (a commit that stalled, then went through): nothing is missing.
        if ((await alreadyWritten([item.entry.id])).has(item.entry.id)) continue
        rowFailure = await writeSpooled([item], [])
        if (rowFailure === undefined) continue
        if (isStoreUnavailable(rowFailure)) throw rowFailure
        await giveUp(item, rowFailure)
      }
    }

    let replaying: Promise<void> | undefined
    let stopped = false
    /** Commits the spool until it is empty, pausing (doubling) while the database is away. */
    const replayAll = (): Promise<void> => {
      if (replaying !== undefined) return replaying
      replaying = (async () => {
        let pause = REPLAY_FIRST_PAUSE_MS
        while (spool.batches().length > 0 && !stopped) {
          let ok = false
          try {
            ok = await replayStep()
          } catch (e) {
            log(Effect.logError("Committing the ledger spool failed; trying again", describeStoreFailure(e)))
          }
          if (ok) pause = REPLAY_FIRST_PAUSE_MS
          else {
            await sleep(pause)
            pause = Math.min(REPLAY_LONGEST_PAUSE_MS, pause * 2)
          }
        }
      })().finally(() => {
        replaying = undefined
        // Batches spooled while the last step ran.
        if (spool.batches().length > 0 && !stopped) replaySoon()
      })
      return replaying
    }
    const replaySoon = () => {
      if (replaying === undefined) void replayAll()
    }

    const commitNext = () => {
      timer = undefined
      immediate = undefined
      if (committing) return
      committing = true
      const batch = pending.splice(0, maxBatch)
      inCommit = batch
      const items: Array<LedgerItem> = []
      for (const item of batch) {
        if (item.entry !== undefined) items.push(item.settlement === undefined ? { entry: item.entry } : { entry: item.entry, settlement: item.settlement })
        if (item.urgent) urgentQueued--
      }
      queuedEntries -= items.length
      void commit(items).then(
        (lost) => {
          committing = false
          inCommit = []
          if (lost === NOTHING_LOST) for (const item of batch) item.done?.(true)
          else for (const item of batch) item.done?.(item.entry === undefined || !lost.has(item.entry.id))
          wake()
        },
        (e: unknown) => {
          committing = false
          inCommit = []
          log(Effect.logError("The ledger writer failed", describeStoreFailure(e)))
          for (const item of batch) item.done?.(false)
          wake()
        },
      )
    }

    const lostAfterShutdown = (entry: GenerationEntry) =>
      Effect.logError(`Generation ${entry.id} was recorded after the store shut down and is not written`)

    /** Appends a generation to the queue; returns at once. */
    const record = (entry: GenerationEntry) =>
      Effect.suspend(() => (enqueue({ entry }) ? Effect.void : lostAfterShutdown(entry)))

    /**
     * `record` as a plain call, for the request path (a fiber per request costs more than the push).
     * `done`, when given, runs once the batch holding the row has committed or is in the spool
     * (true), or neither could be (false, logged). False when the store has shut down.
     */
    const recordSync = (entry: GenerationEntry, done?: (kept: boolean) => void): boolean =>
      enqueue(done === undefined ? { entry } : { entry, done })

    /**
     * Whether `recordSettled` is available: on every engine the ledger writer settles a
     * reservation in the transaction that records its generation. On Postgres a batch takes its
     * rows in one order (reservations, keys by hash, users by id: src/store/settlement.ts), the
     * order reservations and budget slices take them too, so it cannot deadlock with them.
     */
    const settlesInBatch = true

    /**
     * `recordSync` with the reservation to settle in the same transaction: the hold is released
     * exactly when the row that replaces it is written (or, if the row cannot be, alone after it).
     * `done` runs once that transaction has committed or is in the spool (true), or neither could be
     * (false). False when the store has shut down: settle another way.
     */
    const recordSettled = (entry: GenerationEntry, settlement: SettleArgs, done: (kept: boolean) => void): boolean => {
      if (!enqueue({ entry, settlement, done })) return false
      // Admitted against a budget slice: what it did not spend is admissible again at once (src/services/budget-leases.ts).
      settlement.slice?.release(settlement)
      return true
    }

    /**
     * Appends a generation and resolves when its batch has committed (readable by `get`) or is in
     * the spool: true; false when neither could be (or the store has shut down).
     */
    const recordDurable = (entry: GenerationEntry): Effect.Effect<boolean> =>
      Effect.async<boolean>((resume) => {
        if (!enqueue({ entry, done: (kept) => resume(Effect.succeed(kept)) })) resume(Effect.as(lostAfterShutdown(entry), false))
      })

    /** Flushes everything queued so far, without waiting for the window, and waits until it is durable. */
    const flush: Effect.Effect<void> = Effect.async<void>((resume) => {
      if (!enqueue({ urgent: true, done: () => resume(Effect.void) })) resume(Effect.void)
    })

    // At shutdown: flush until nothing is queued (rows may arrive during a flush), one last try at the
    // spool (what stays in it is in its file for the next start), then close.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        do yield* flush
        while (pending.length > 0)
        closed = true
        if (timer !== undefined) clearTimeout(timer)
        if (spool.batches().length > 0) yield* Effect.promise(() => Promise.race([replayAll(), sleep(commitTimeoutMs)]))
        stopped = true
        if (outageTimer !== undefined) clearInterval(outageTimer)
        if (spool.batches().length > 0) {
          yield* Effect.logWarning(`${spool.generations()} generations stay in the ledger spool (${spoolPath ?? "memory"}); they are committed at the next start`)
        }
        yield* Effect.promise(() => spool.close())
        sqlite?.close()
      }),
    )

    // The spools of workers of `serve --workers` that stopped with batches in them (given by the supervisor).
    const orphans = spoolPath === undefined ? [] : adoptedSpoolIds().map((id) => spoolPathOf(config.dataDir, id))
    if (orphans.length > 0) {
      const adopted = yield* Effect.promise(() => adoptSpools(spool, orphans))
      if (adopted > 0) yield* Effect.logWarning(`Took ${adopted} generations from the ledger spools of stopped workers (${orphans.join(", ")})`)
      spoolChanged()
    }
    // A spool left by an earlier run (the database was away when it stopped or was killed): committed before serving.
    if (spool.batches().length > 0) {
      yield* Effect.logWarning(`Committing ${spool.generations()} generations left in the ledger spool (${spoolPath}) before serving`)
      yield* Effect.promise(() => replayAll())
      yield* Effect.logInfo("The ledger spool is committed")
    }

    const holds = (batch: ReadonlyArray<Pending>, id: string) => batch.some((p) => p.entry !== undefined && p.entry.id === id)
    /**
     * Waits until generation `id` is written when it is still queued or being committed (the
     * queue is flushed at once, not at the end of its window); returns at once otherwise. A
     * reader of the ledger calls it first, so a record is readable as soon as its answer is out.
     */
    const written = (id: string): Effect.Effect<void> =>
      Effect.suspend(() => (holds(pending, id) || holds(inCommit, id) ? flush : Effect.void))
    /** `written` for every record queued so far: before a read of usage or credits, which sum the ledger. */
    const caughtUp: Effect.Effect<void> = Effect.suspend(() => {
      const queued = queuedEntries > 0 || inCommit.length > 0 ? flush : Effect.void
      // Spooled records are the ledger's too: the sum waits (a while) for the spool to be committed.
      return Effect.zipRight(
        queued,
        Effect.suspend(() => (spool.busy() ? Effect.promise(() => Promise.race([replayAll(), sleep(commitTimeoutMs)])) : Effect.void)),
      )
    })

    /**
     * Whether a settlement that lowers `keyHash`'s holds (or, given `userId`, that user's credit
     * holds) is queued or being committed. Until it commits, the finished request's whole worst
     * case still counts against the limit: a refusal waits for that commit and asks once more
     * (src/services/reservations.ts). A scan of the queue, on the refusal's path only.
     */
    const settling = (keyHash: string, userId?: string): boolean => {
      const lowers = (p: Pending) =>
        p.settlement !== undefined && (userId === undefined ? p.settlement.keyHash === keyHash : p.settlement.userId === userId && p.settlement.creditsNano > 0)
      return pending.some(lowers) || inCommit.some(lowers)
    }

    /** Generations waiting to be written. */
    const queueDepth = Effect.sync(() => queuedEntries)

    const get = (id: string) =>
      sql<GenerationRow>`SELECT * FROM generations WHERE id = ${id}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), fromRow)),
        Effect.orDie,
      )

    const getContent = (id: string) =>
      sql<{ input: string; output: string }>`SELECT input, output FROM generation_content WHERE generation_id = ${id}`.pipe(
        Effect.map((rows) =>
          Option.map(
            Option.fromNullable(rows[0]),
            (r): GenerationContent => ({
              input: JSON.parse(r.input) as GenerationContent["input"],
              output: JSON.parse(r.output) as GenerationContent["output"],
            }),
          ),
        ),
        Effect.orDie,
      )

    return {
      /** `ledger.durable_answers`: answers wait for their records' commit (src/pipeline/egress.ts, finish.ts). */
      durable: eager,
      record,
      recordSync,
      recordDurable,
      recordSettled,
      settlesInBatch,
      flush,
      written,
      caughtUp,
      settling,
      queueDepth,
      stats: Effect.sync((): WriterStats => ({ ...stats })),
      /** What the spool holds (a plain call, for `/metrics` and `/v1/ready`). */
      spoolStats: (): SpoolStats => ({ generations: spool.generations(), bytes: spool.bytes(), ageSeconds: spool.ageSeconds(), full: spool.full() }),
      /** `admission.full`: new requests are refused (503) while the spool is at its bound. */
      admission,
      /** A request met the store unreachable: logged once per outage. */
      unavailable,
      get,
      getContent,
    } as const
  }),
  dependencies: [LedgerHooks.Default],
}) {}
