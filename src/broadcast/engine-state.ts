/**
 * What the delivery engine's parts share (src/broadcast/engine.ts): its dependencies, its
 * counters and gauges, the batches and bodies it keeps between passes, and the per-destination
 * filters, breakers and sends in flight. One value, made once per engine.
 */
import type { SqlClient } from "@effect/sql"
import type { Effect, Either, Option } from "effect"
import type { BroadcastSettings } from "../config/Config.js"
import type { DestinationRules } from "../domain/destinations.js"
import type { ResolvedDestination } from "../services/Destinations.js"
import type { TraceBatch } from "./exporter.js"
import type { ClaimedRow, DeliveryQueue } from "./deliveries.js"
import type { compileFilter } from "./filters.js"
import type { DeliveryContent, DeliveryPayload, OutboxItems, TraceItem } from "./payload.js"

export type Run = <A>(effect: Effect.Effect<A>) => Promise<A>

export interface EngineDeps {
  /** The engine's own client (the Worker's connection). */
  readonly sql: SqlClient.SqlClient
  readonly run: Run
  readonly log: (effect: Effect.Effect<void>) => void
  readonly settings: BroadcastSettings
  readonly allowPrivateAddresses: boolean
  readonly queue: DeliveryQueue
  /** The destination kinds by name, whose exporters build what is sent (the registry's, src/broadcast/exporters/index.ts). */
  readonly kinds: ReadonlyMap<string, DestinationRules>
  /** A destination with its secrets in plain text; none once deleted. */
  readonly resolved: (id: string) => Effect.Effect<Option.Option<ResolvedDestination>>
  /** Opens a value sealed with the gateway's secret key. */
  readonly open: (sealed: string) => Either.Either<string, unknown>
  /** Told after the counters changed (the Worker forwards them to the thread that serves /metrics). */
  readonly onCount?: () => void
  /** Told of each lease a claim takes, which waits for it (the Worker's host releases a dead Worker's leases). */
  readonly onLease?: (until: number) => Promise<void>
}

/** Outcome counters by destination kind, for `/metrics`. */
export interface BroadcastStats {
  /** `${kind}\u0000${outcome}` → count; outcomes: delivered, failed (retried), dead, filtered, dropped. */
  readonly outcomes: ReadonlyMap<string, number>
  /** Rows waiting (pending), as last counted. */
  readonly pending: number
  /** Seconds since the oldest pending row was written, as last counted. */
  readonly lagSeconds: number
}

/** An outbox batch as read and opened once per claim, for every destination it goes to. */
export interface OpenedBatch {
  readonly items: OutboxItems
  /** Aligned with `items.generations`: each one's payload, its record read from its row; undefined if that row is gone. */
  readonly payloads: ReadonlyArray<DeliveryPayload | undefined>
  /** Aligned with `items.generations`; undefined when no content was kept (or it cannot be opened). */
  readonly contents: ReadonlyArray<DeliveryContent | null> | undefined
  /** The trace items built so far, by the destinations' switches (`optionsKey`), aligned with `items.generations`. */
  readonly traced: Map<string, Array<TraceItem | undefined>>
}

/**
 * What one pass claimed: the batches its rows point to (with the trace items built from them so
 * far), and the OTLP bodies built for the destinations with the same switches and generations.
 */
export interface Pass {
  readonly batches: ReadonlyMap<string, OpenedBatch>
  readonly built: Map<string, TraceBatch>
}

/** A destination's circuit breaker: consecutive failed sends, and until when it is open. */
export interface Breaker {
  failures: number
  openUntil: number
  opens: number
}

export interface EngineState {
  readonly deps: EngineDeps
  readonly outcomes: Map<string, number>
  pendingGauge: number
  lagGauge: number
  /** Key names by hash, with when each was read (src/broadcast/bodies.ts). */
  readonly keyNames: Map<string, { readonly name: string | null; readonly at: number }>
  /** Batches opened and bodies built, kept between passes within their bounds (src/broadcast/bodies.ts). */
  readonly opened: Map<string, OpenedBatch>
  openedGenerations: number
  readonly built: Map<string, TraceBatch>
  builtBytes: number
  /** Each destination's compiled filter rules, by the destination's version. */
  readonly filters: Map<string, { readonly version: string; readonly test: ReturnType<typeof compileFilter> }>
  readonly breakers: Map<string, Breaker>
  /** Sends in flight per destination. */
  readonly inFlight: Map<string, number>
  /** Deliveries started by a pass and not yet ended (the last pass at shutdown waits for them). */
  readonly running: Set<Promise<void>>
}

export const makeEngineState = (deps: EngineDeps): EngineState => ({
  deps,
  outcomes: new Map(),
  pendingGauge: 0,
  lagGauge: 0,
  keyNames: new Map(),
  opened: new Map(),
  openedGenerations: 0,
  built: new Map(),
  builtBytes: 0,
  filters: new Map(),
  breakers: new Map(),
  inFlight: new Map(),
  running: new Set(),
})

/** Counts `n` generations of `kind` with `outcome` (none when `n` is not positive). */
export const count = (state: EngineState, kind: string, outcome: string, n = 1) => {
  if (n <= 0) return
  const key = `${kind}\u0000${outcome}`
  state.outcomes.set(key, (state.outcomes.get(key) ?? 0) + n)
  state.deps.onCount?.()
}

export const generationsIn = (rows: ReadonlyArray<ClaimedRow>) => rows.reduce((n, r) => n + Number(r.generations), 0)
