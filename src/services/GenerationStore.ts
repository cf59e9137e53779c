/**
 * Generation records, their stored content, and their spend rows, written by group commit
 * (DESIGN §5): `record` only appends to an in-memory queue (no I/O on the request's path);
 * one writer fiber flushes the queue in ONE transaction every `windowMs` or every `maxBatch`
 * rows, whichever comes first. The layer's finalizer flushes what is queued, so a clean
 * shutdown loses nothing. A failed flush is retried once; if it fails again the rows are
 * written one by one, so one bad row cannot take its batch down, and a row that still fails
 * is logged with its id.
 */
import { SqlClient } from "@effect/sql"
import { Cause, Context, Deferred, Effect, Option } from "effect"
import type {
  GenerationContent,
  GenerationEntry,
  GenerationError,
  GenerationStatus,
  StoredGeneration,
} from "../domain/generations.js"

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
  defaultValue: (): GenerationWriterSettings => ({ windowMs: 5, maxBatch: 200, retryDelayMs: 50 }),
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
  /** Completed once the batch holding this item is committed (or given up on). */
  readonly done?: Deferred.Deferred<void>
  /** A flush request: do not wait for the window. */
  readonly urgent?: boolean
}

/** A row of `generations` (a type alias, so it is a record `sql.insert` takes). */
type GenerationRow = {
  readonly id: string
  readonly key_hash: string
  readonly user_id: string
  readonly workspace_id: string
  readonly model: string
  readonly provider_name: string
  readonly upstream_model: string
  readonly upstream_id: string | null
  readonly created_at: string
  readonly streamed: number
  readonly cancelled: number
  readonly finish_reason: string | null
  readonly session_id: string | null
  readonly input_tokens: number
  readonly cached_tokens: number
  readonly cache_write_tokens: number
  readonly output_tokens: number
  readonly reasoning_tokens: number
  readonly total_cost: number
  readonly is_byok: number
  readonly generation_time_ms: number
  readonly latency_ms: number | null
  readonly status: GenerationStatus
  readonly error: string | null
  readonly has_content: number
}

/** A failure in one line: a SqlError's own message hides the driver's ("UNIQUE constraint failed…"). */
const describeFailure = (cause: Cause.Cause<unknown>): string => {
  const e = Cause.squash(cause)
  if (!(e instanceof Error)) return String(e)
  const inner = (e as { cause?: unknown }).cause
  return inner instanceof Error ? `${e.message}: ${inner.message}` : e.message
}

const count = (n: number) => Math.max(0, Math.round(Number.isFinite(n) ? n : 0))
const bit = (b: boolean) => (b ? 1 : 0)

const toRow = (e: GenerationEntry): GenerationRow => ({
  id: e.id,
  key_hash: e.keyHash,
  user_id: e.userId,
  workspace_id: e.workspaceId,
  model: e.model,
  provider_name: e.providerName,
  upstream_model: e.upstreamModel,
  upstream_id: e.upstreamId ?? null,
  created_at: e.createdAt,
  streamed: bit(e.streamed),
  cancelled: bit(e.cancelled),
  finish_reason: e.finishReason,
  session_id: e.sessionId,
  input_tokens: count(e.inputTokens),
  cached_tokens: count(e.cachedTokens),
  cache_write_tokens: count(e.cacheWriteTokens),
  output_tokens: count(e.outputTokens),
  reasoning_tokens: count(e.reasoningTokens),
  total_cost: Number.isFinite(e.totalCost) ? e.totalCost : 0,
  is_byok: bit(e.isByok),
  generation_time_ms: count(e.generationTimeMs),
  latency_ms: e.latencyMs === null ? null : count(e.latencyMs),
  status: e.status,
  error: e.error == null ? null : JSON.stringify(e.error),
  has_content: bit(e.content != null),
})

const fromRow = (r: GenerationRow): StoredGeneration => ({
  id: r.id,
  keyHash: r.key_hash,
  userId: r.user_id,
  workspaceId: r.workspace_id,
  model: r.model,
  providerName: r.provider_name,
  upstreamModel: r.upstream_model,
  upstreamId: r.upstream_id,
  createdAt: r.created_at,
  streamed: Number(r.streamed) === 1,
  cancelled: Number(r.cancelled) === 1,
  finishReason: r.finish_reason,
  sessionId: r.session_id,
  inputTokens: Number(r.input_tokens),
  cachedTokens: Number(r.cached_tokens),
  cacheWriteTokens: Number(r.cache_write_tokens),
  outputTokens: Number(r.output_tokens),
  reasoningTokens: Number(r.reasoning_tokens),
  totalCost: Number(r.total_cost),
  isByok: Number(r.is_byok) === 1,
  generationTimeMs: Number(r.generation_time_ms),
  latencyMs: r.latency_ms === null ? null : Number(r.latency_ms),
  status: r.status,
  error: r.error === null ? null : (JSON.parse(r.error) as GenerationError),
  hasContent: Number(r.has_content) === 1,
})

export class GenerationStore extends Effect.Service<GenerationStore>()("GenerationStore", {
  scoped: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const options = yield* GenerationWriterOptions
    const maxBatch = Math.max(1, options.maxBatch)

    // The queue is a plain array: `record` is one push, no fiber, no I/O.
    const pending: Array<Pending> = []
    let queuedEntries = 0
    let urgentQueued = 0
    /** Set once the final flush has run: nothing would write a row queued after it. */
    let closed = false
    const hasWork = yield* Effect.makeLatch(false)
    const flushNow = yield* Effect.makeLatch(false)
    let stats: WriterStats = { flushes: 0, rowsWritten: 0, failedBatches: 0, failedRows: 0 }

    /** False when the store has shut down (the caller logs the loss). */
    const enqueue = (item: Pending): boolean => {
      if (closed) return false
      pending.push(item)
      if (item.entry !== undefined) queuedEntries++
      if (item.urgent) urgentQueued++
      hasWork.unsafeOpen()
      if (item.urgent || pending.length >= maxBatch) flushNow.unsafeOpen()
      return true
    }

    const lostAfterShutdown = (entry: GenerationEntry) =>
      Effect.logError(`Generation ${entry.id} was recorded after the store shut down and is not written`)

    /** One transaction: the generation rows, their content rows and one spend row each. */
    const writeBatch = (entries: ReadonlyArray<GenerationEntry>) =>
      sql.withTransaction(
        Effect.gen(function* () {
          yield* sql`INSERT INTO generations ${sql.insert(entries.map(toRow))}`
          const contents = entries.flatMap((e) =>
            e.content == null
              ? []
              : [{ generation_id: e.id, input: JSON.stringify(e.content.input), output: JSON.stringify(e.content.output) }],
          )
          if (contents.length > 0) yield* sql`INSERT INTO generation_content ${sql.insert(contents)}`
          yield* sql`INSERT INTO spend ${sql.insert(
            entries.map((e) => ({
              key_hash: e.keyHash,
              user_id: e.userId,
              workspace_id: e.workspaceId,
              generation_id: e.id,
              amount_usd: Number.isFinite(e.totalCost) ? e.totalCost : 0,
              is_byok: bit(e.isByok),
              created_at: e.createdAt,
            })),
          )}`
        }),
      ).pipe(
        Effect.tap(() =>
          Effect.sync(() => {
            stats = { ...stats, flushes: stats.flushes + 1, rowsWritten: stats.rowsWritten + entries.length }
          }),
        ),
      )

    /** Writes a batch: once, again after a pause, then row by row; never fails. */
    const commit = (entries: ReadonlyArray<GenerationEntry>) => {
      if (entries.length === 0) return Effect.void
      return writeBatch(entries).pipe(
        Effect.catchAllCause(() => Effect.zipRight(Effect.sleep(options.retryDelayMs), writeBatch(entries))),
        Effect.catchAllCause((cause) =>
          Effect.gen(function* () {
            stats = { ...stats, failedBatches: stats.failedBatches + 1 }
            yield* Effect.logWarning(
              `A batch of ${entries.length} generation rows failed twice; writing them one by one`,
              describeFailure(cause),
            )
            for (const entry of entries) {
              yield* writeBatch([entry]).pipe(
                Effect.catchAllCause((rowCause) =>
                  Effect.zipRight(
                    Effect.sync(() => {
                      stats = { ...stats, failedRows: stats.failedRows + 1 }
                    }),
                    Effect.logError(
                      `Generation ${entry.id} (key ${entry.keyHash.slice(0, 8)}…, $${entry.totalCost}) could not be written`,
                      describeFailure(rowCause),
                    ),
                  ),
                ),
              )
            }
          }),
        ),
      )
    }

    const writer = Effect.gen(function* () {
      while (true) {
        yield* hasWork.await
        // Wait out the window unless the batch is full or a flush was asked for.
        yield* Effect.race(Effect.sleep(options.windowMs), flushNow.await)
        const batch = pending.splice(0, maxBatch)
        const entries: Array<GenerationEntry> = []
        for (const item of batch) {
          if (item.entry !== undefined) entries.push(item.entry)
          if (item.urgent) urgentQueued--
        }
        queuedEntries -= entries.length
        if (pending.length === 0) hasWork.unsafeClose()
        if (pending.length < maxBatch && urgentQueued === 0) flushNow.unsafeClose()
        yield* commit(entries).pipe(
          Effect.ensuring(
            Effect.forEach(batch, (item) => (item.done === undefined ? Effect.void : Deferred.succeed(item.done, undefined)), {
              discard: true,
            }),
          ),
        )
      }
    })

    yield* Effect.forkScoped(writer)
    // Finalizers run last-in first-out: this flush runs while the writer is still alive.
    yield* Effect.addFinalizer(() =>
      Effect.zipRight(
        flush,
        Effect.sync(() => {
          closed = true
        }),
      ),
    )

    /** Appends a generation to the queue; returns at once. */
    const record = (entry: GenerationEntry) =>
      Effect.suspend(() => (enqueue({ entry }) ? Effect.void : lostAfterShutdown(entry)))

    /**
     * `record` as a plain call, for the request path (a fiber per request costs more than the push).
     * False when the store has shut down.
     */
    const recordSync = (entry: GenerationEntry): boolean => enqueue({ entry })

    /** Appends a generation and resolves when its batch has committed (readable by `get`). */
    const recordDurable = (entry: GenerationEntry) =>
      Effect.flatMap(Deferred.make<void>(), (done) =>
        Effect.suspend(() => (enqueue({ entry, done }) ? Deferred.await(done) : lostAfterShutdown(entry))),
      )

    /** Flushes everything queued so far, without waiting for the window, and waits until it is durable. */
    const flush: Effect.Effect<void> = Effect.flatMap(Deferred.make<void>(), (done) =>
      Effect.suspend(() => (enqueue({ done, urgent: true }) ? Deferred.await(done) : Effect.void)),
    )

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
      record,
      recordSync,
      recordDurable,
      flush,
      queueDepth,
      stats: Effect.sync(() => stats),
      get,
      getContent,
    } as const
  }),
}) {}
