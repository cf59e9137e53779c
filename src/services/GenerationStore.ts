/**
 * Generation records, their stored content, and their spend rows, written by group commit
 * (DESIGN §5): `record` only appends to an in-memory queue (no I/O on the request's path);
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
import { MainConnection } from "../store/sqlite-client.js"
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
  defaultValue: (): GenerationWriterSettings => ({ windowMs: 25, maxBatch: 200, retryDelayMs: 50 }),
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
}

interface Pending {
  readonly entry?: GenerationEntry
  /** Settled in the transaction that writes `entry`. */
  readonly settlement?: SettleArgs
  /** Called once the batch holding this item is committed (or given up on). */
  readonly done?: () => void
  /** A flush request: do not wait for the window. */
  readonly urgent?: boolean
}

/** How long a busy SQLite database is waited out before the batch counts as failed. */
const BUSY_RETRY_MS = 5
const BUSY_GIVE_UP_MS = 10_000

/** A failure in one line: a SqlError's own message hides the driver's ("UNIQUE constraint failed…"). */
const describeFailure = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e)
  const inner = (e as { cause?: unknown }).cause
  return inner instanceof Error ? `${e.message}: ${inner.message}` : e.message
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms))

export class GenerationStore extends Effect.Service<GenerationStore>()("GenerationStore", {
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
      if (!main.idle()) return runPromiseExit(sql.withTransaction(Effect.sync(write))).then(settled)
      try {
        write()
        return Promise.resolve()
      } catch (e) {
        return Promise.reject(e)
      }
    }
    const writeBatch = (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows>): Promise<void> =>
      sqlite === undefined
        ? runPromiseExit(writeRows(items, extra)).then(settled)
        : besideMainNow(() => sqlite.write(items, extra))
    /** The hooks' rows for a batch (the broadcast outbox); a hook that fails adds nothing rather than losing the batch. */
    const extraRows = async (items: ReadonlyArray<LedgerItem>): Promise<ReadonlyArray<LedgerRows>> => {
      try {
        return await hooks.rowsFor(items.map((i) => i.entry))
      } catch (e) {
        log(Effect.logError("A ledger hook failed; the batch is written without its rows", describeFailure(e)))
        return []
      }
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
    const stats = { flushes: 0, rowsWritten: 0, failedBatches: 0, failedRows: 0 }

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

    /** One transaction; a busy database is waited out. Returns the failure, or undefined once committed. */
    const attempt = async (items: ReadonlyArray<LedgerItem>, withHooks = true): Promise<unknown> => {
      const giveUpAt = Date.now() + BUSY_GIVE_UP_MS
      const extra = withHooks ? await extraRows(items) : []
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

    /** Writes a batch: once, again after a pause, then row by row; never throws. */
    const commit = async (items: ReadonlyArray<LedgerItem>) => {
      if (items.length === 0) return
      if ((await attempt(items)) === undefined) return
      await sleep(options.retryDelayMs)
      const failure = await attempt(items)
      if (failure === undefined) return
      stats.failedBatches++
      log(
        Effect.logWarning(
          `A batch of ${items.length} generation rows failed twice; writing them one by one`,
          describeFailure(failure),
        ),
      )
      for (const item of items) {
        let rowFailure = await attempt([item])
        if (rowFailure !== undefined && (await attempt([item], false)) === undefined) {
          // The hooks' rows (the broadcast outbox) were what failed: the record is kept without them.
          log(Effect.logWarning(`Generation ${item.entry.id} was written without its ledger hooks' rows`, describeFailure(rowFailure)))
          rowFailure = undefined
        }
        if (rowFailure === undefined) continue
        const entry = item.entry
        stats.failedRows++
        log(
          Effect.logError(
            `Generation ${entry.id} (key ${entry.keyHash.slice(0, 8)}…, $${entry.totalCost}) could not be written`,
            describeFailure(rowFailure),
          ),
        )
        if (item.settlement !== undefined) {
          await settleAlone(item.settlement).catch((e: unknown) =>
            log(Effect.logError(`The reservation of generation ${entry.id} could not be settled`, describeFailure(e))),
          )
        }
      }
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
      void commit(items).finally(() => {
        committing = false
        inCommit = []
        for (const item of batch) item.done?.()
        wake()
      })
    }

    const lostAfterShutdown = (entry: GenerationEntry) =>
      Effect.logError(`Generation ${entry.id} was recorded after the store shut down and is not written`)

    /** Appends a generation to the queue; returns at once. */
    const record = (entry: GenerationEntry) =>
      Effect.suspend(() => (enqueue({ entry }) ? Effect.void : lostAfterShutdown(entry)))

    /**
     * `record` as a plain call, for the request path (a fiber per request costs more than the push).
     * `done`, when given, runs once the batch holding the row has committed (or been given up on).
     * False when the store has shut down.
     */
    const recordSync = (entry: GenerationEntry, done?: () => void): boolean =>
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
     * `done` runs once that transaction has committed or been given up on. False when the store
     * has shut down: settle another way.
     */
    const recordSettled = (entry: GenerationEntry, settlement: SettleArgs, done: () => void): boolean => {
      if (!enqueue({ entry, settlement, done })) return false
      // Admitted against a budget slice: what it did not spend is admissible again at once (src/services/Spend.ts).
      settlement.slice?.release(settlement)
      return true
    }

    /** Appends a generation and resolves when its batch has committed (readable by `get`). */
    const recordDurable = (entry: GenerationEntry) =>
      Effect.async<void>((resume) => {
        if (!enqueue({ entry, done: () => resume(Effect.void) })) resume(lostAfterShutdown(entry))
      })

    /** Flushes everything queued so far, without waiting for the window, and waits until it is durable. */
    const flush: Effect.Effect<void> = Effect.async<void>((resume) => {
      if (!enqueue({ urgent: true, done: () => resume(Effect.void) })) resume(Effect.void)
    })

    // At shutdown: flush until nothing is queued (rows may arrive during a flush), then close.
    yield* Effect.addFinalizer(() =>
      Effect.gen(function* () {
        do yield* flush
        while (pending.length > 0)
        closed = true
        if (timer !== undefined) clearTimeout(timer)
        sqlite?.close()
      }),
    )

    const holds = (batch: ReadonlyArray<Pending>, id: string) => batch.some((p) => p.entry !== undefined && p.entry.id === id)
    /**
     * Waits until generation `id` is written when it is still queued or being committed (the
     * queue is flushed at once, not at the end of its window); returns at once otherwise. A
     * reader of the ledger calls it first, so a record is readable as soon as its answer is out.
     */
    const written = (id: string): Effect.Effect<void> =>
      Effect.suspend(() => (holds(pending, id) || holds(inCommit, id) ? flush : Effect.void))
    /** `written` for every record queued so far: before a read of usage or credits, which sum the ledger. */
    const caughtUp: Effect.Effect<void> = Effect.suspend(() => (queuedEntries > 0 || inCommit.length > 0 ? flush : Effect.void))

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
      queueDepth,
      stats: Effect.sync((): WriterStats => ({ ...stats })),
      get,
      getContent,
    } as const
  }),
  dependencies: [LedgerHooks.Default],
}) {}
