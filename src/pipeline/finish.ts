/**
 * Finish: settle the request's reservation with what it cost and record its generation, exactly
 * once per request (`RequestLife.finished`), whatever ended it (an answer, a failure, the client
 * leaving, the catch-all). The settlements still being handed to the store are the lifecycle's
 * (`drain`). With `ledger.durable_answers`, the answer's last byte waits for the commit.
 */
import { Effect, Option } from "effect"
import { costOf, fromNanoUsd, type Usage } from "../domain/pricing.js"
import type { GenerationEntry, PreviousError } from "../domain/generations.js"
import type { Endpoint } from "../services/Catalog.js"
import type { GenerationStore } from "../services/GenerationStore.js"
import { type Reservation, Spend } from "../services/Spend.js"
import { storedInput } from "./content.js"
import { chargedUsage, generationRecord, NO_USAGE, storedContent, targetOf } from "./record.js"
import type { ErrorLog } from "../lib/log.js"
import type { Encoder } from "../formats/format.js"
import type { RequestLifecycle } from "./lifecycle.js"
import type { Prepared } from "./pre-model.js"

/** One attempt, for `service_metadata.attempts`. */
export interface Attempt {
  readonly model: string
  readonly provider: string
  readonly status: number
}

/** One request's life past its decision: what finish reads, and whether it has run. */
export interface RequestLife {
  readonly prepared: Prepared
  readonly generationId: string
  /** Unix ms. */
  readonly startedAt: number
  /** The server's request id, for the log. */
  readonly requestId: string | undefined
  finished: boolean
  /** The upstream attempts so far (the route's list), for broadcast's child spans. */
  attempts?: ReadonlyArray<Attempt>
}

/** What happened to one request, for settlement and the generation record. */
export interface Outcome {
  readonly endpoint: Endpoint | undefined
  readonly assembler: Encoder | undefined
  readonly status: "completed" | "incomplete" | "failed" | "cancelled"
  readonly error?: { readonly message: string; readonly status: number; readonly previousErrors?: ReadonlyArray<PreviousError> }
  readonly firstTokenAt: number | undefined
  /** Nothing came from upstream (no byte, no usage): recorded at $0, whatever ended it. */
  readonly nothingCame?: boolean
  /**
   * The server-tool loop's sums over its turns (each turn's usage within that turn's bounds, each
   * at its endpoint's price, and the tools' own prices): charged instead of one turn's usage.
   */
  readonly charged?: { readonly usage: Usage; readonly cost: number }
  /** The loop's holds beyond the request's own (one per later turn): settled with the rest of the cost. */
  readonly extraHolds?: ReadonlyArray<Reservation>
  /** What the server tools did, for the record (`num_search_results`, `num_fetches`, `web_search_engine`). */
  readonly serverTools?: { readonly numSearchResults: number | null; readonly numFetches: number | null; readonly webSearchEngine: string | null }
}

/** What a hold holds, in USD: against the key's limit or the user's credits, whichever it took. */
export const heldUsd = (hold: Reservation): number => fromNanoUsd(Math.max(hold.amountNano, hold.creditsNano))

/** What the request's own hold counts of `cost` when the loop's holds take the rest. */
const shareOf = (reservation: Option.Option<Reservation>, cost: number): number =>
  Option.isSome(reservation) ? Math.min(cost, heldUsd(reservation.value)) : 0

/** A request's own generation record: the common fields (record.ts), the client's headers, the server tools' counts, broadcast's references and the stored content. */
const requestRecord = (
  life: RequestLife,
  endpoint: Endpoint,
  streamed: boolean,
  outcome: Outcome,
  usage: Usage,
  cost: number,
  usageEstimated: boolean,
  now: number,
): GenerationEntry => {
  const { prepared, generationId, startedAt } = life
  const { assembler } = outcome
  const row = generationRecord({
    id: generationId,
    owner: prepared.principal,
    sessionId: prepared.sessionId,
    startedAt,
    endedAt: now,
    streamed,
    target: targetOf(endpoint),
    status: outcome.status,
    usage,
    cost,
    finishReason: assembler?.finishReason ?? null,
    firstTokenAt: outcome.firstTokenAt,
    usageEstimated,
    error: outcome.error,
  })
  row.httpReferer = prepared.httpReferer
  row.appTitle = prepared.appTitle
  row.userAgent = prepared.userAgent
  row.router = prepared.router
  if (outcome.serverTools !== undefined) {
    row.numSearchResults = outcome.serverTools.numSearchResults
    row.numFetches = outcome.serverTools.numFetches
    row.webSearchEngine = outcome.serverTools.webSearchEngine
  }
  // References only: the outbox reads them when a destination wants this generation.
  row.broadcast = {
    request: prepared.request,
    input: () => storedInput(prepared.request),
    completion: assembler?.completionText ?? null,
    reasoning: assembler && assembler.reasoningText !== "" ? assembler.reasoningText : null,
    attempts: life.attempts ?? [],
    pricing: endpoint.pricing,
    strategy: prepared.plan.strategy,
  }
  if (prepared.storeContent) row.content = storedContent(prepared.request, assembler)
  return row
}

export interface FinishDeps {
  readonly generationStore: GenerationStore
  readonly runPromise: <A>(effect: Effect.Effect<A, unknown, Spend>) => Promise<A>
  readonly lifecycle: RequestLifecycle
  readonly log: ErrorLog
}

/**
 * Settles and records; returns, with durable answers, the promise of both being committed or in the
 * ledger spool's file (true), or neither (false: the answer must not end as complete); else undefined.
 * Never throws.
 */
export type Finish = (life: RequestLife, streamed: boolean, outcome: Outcome) => Promise<boolean> | undefined

export const makeFinish = (deps: FinishDeps): Finish => {
  const { generationStore, runPromise, lifecycle } = deps
  const durable = generationStore.durable
  const log = (life: RequestLife, msg: string, error?: unknown) =>
    deps.log({ requestId: life.requestId, generationId: life.generationId }, msg, error)

  const finish = (life: RequestLife, streamed: boolean, outcome: Outcome): Promise<boolean> | undefined => {
    if (life.finished) return undefined
    life.finished = true
    const { prepared } = life
    const { assembler, endpoint } = outcome
    const counted = endpoint !== undefined && outcome.nothingCame !== true
    const charged = outcome.charged
    const usage = charged !== undefined ? charged.usage : counted ? chargedUsage(prepared, endpoint, assembler) : NO_USAGE
    // The stages' priced outbound calls (OCR, a priced moderation call) were made whatever the upstream did.
    const modelCost = charged !== undefined ? charged.cost : counted ? Math.max(0, costOf(endpoint.pricing, usage)) : 0
    const cost = modelCost + prepared.spentUsd
    const isByok = endpoint?.isByok ?? false
    const now = Date.now()
    if (endpoint === undefined && Option.isNone(prepared.reservation)) return undefined
    const entry = endpoint === undefined ? undefined : requestRecord(life, endpoint, streamed, outcome, usage, cost, counted && assembler?.usage === undefined, now)
    if (entry !== undefined && Option.isNone(prepared.reservation)) {
      // Nothing held: one push onto the ledger queue, no fiber (the common, unlimited-key case).
      if (durable) return recordAndWait(life, entry)
      if (!generationStore.recordSync(entry)) log(life, "generation recorded after shutdown")
      return undefined
    }
    const countsForKey = !isByok || prepared.principal.key.include_byok_in_limit === 1
    const extraHolds = outcome.extraHolds
    // Each hold counts at most what it held: the loop's cost is spread over the request's hold and its turns' holds.
    const actualUsd = extraHolds === undefined ? (countsForKey ? cost : 0) : shareOf(prepared.reservation, countsForKey ? cost : 0)
    if (extraHolds !== undefined) settleExtra(life, extraHolds, Math.max(0, (countsForKey ? cost : 0) - actualUsd))
    if (entry !== undefined && Option.isSome(prepared.reservation)) {
      // On a SQLite file the ledger settles the hold in the transaction that writes the row: no fiber.
      let settled: (kept: boolean) => void = () => undefined
      const done = new Promise<boolean>((resolve) => {
        settled = resolve
      })
      if (generationStore.recordSettled(entry, { ...prepared.reservation.value, actualUsd }, settled)) {
        lifecycle.settlingOn(done)
        return durable ? done : undefined
      }
    }
    const program = Effect.gen(function* () {
      const spend = yield* Spend
      const settle = Option.isSome(prepared.reservation) ? spend.settle(prepared.reservation.value, actualUsd) : Effect.void
      if (entry === undefined) return yield* Effect.as(settle, true)
      // Release the hold only once the ledger row that replaces it is durable: credits are
      // computed from the ledger, and in between the spend would be counted nowhere.
      return yield* generationStore.recordDurable(entry).pipe(Effect.ensuring(settle))
    })
    const done: Promise<boolean> = runPromise(program).then(
      (kept) => kept,
      (e: unknown) => {
        log(life, "settling a request failed", e)
        return entry === undefined
      },
    )
    lifecycle.settlingOn(done)
    return durable ? done : undefined
  }

  /** The loop's holds, each settled with its share of `rest` (in order: the last one takes what is left). */
  const settleExtra = (life: RequestLife, holds: ReadonlyArray<Reservation>, rest: number) => {
    let left = rest
    const program = Effect.gen(function* () {
      const spend = yield* Spend
      for (let i = 0; i < holds.length; i++) {
        const hold = holds[i] as Reservation
        const share = i === holds.length - 1 ? left : Math.min(left, heldUsd(hold))
        left -= share
        yield* spend.settle(hold, share)
      }
    })
    const done = runPromise(program).then(
      () => undefined,
      (e: unknown) => log(life, "settling a request's loop holds failed", e),
    )
    lifecycle.settlingOn(done)
  }

  /** `recordSync` that resolves once the row's batch has committed or is spooled (true), or neither could be (false, logged). */
  const recordAndWait = (life: RequestLife, entry: GenerationEntry): Promise<boolean> =>
    new Promise<boolean>((resolve) => {
      if (generationStore.recordSync(entry, resolve)) return
      log(life, "generation recorded after shutdown")
      resolve(false)
    })

  return finish
}
