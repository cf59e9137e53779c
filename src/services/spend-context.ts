/**
 * What the parts of Spend share (src/services/Spend.ts): the store, the settings and this
 * process's name as the owner of holds, built once when Spend's layer is and passed as one value
 * to the reservations, the refusals, the budget leases and the hold leases. Nothing in it is made
 * per request.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Effect } from "effect"
import type { Settings } from "../config/Config.js"
import type { ReserveArgs, ReserveOutcome, SqliteSpend } from "../store/spend-sqlite.js"
import type { GenerationStore } from "./GenerationStore.js"
import type { KeyRow } from "./KeyStore.js"

/** The window of a key whose limit never resets. */
export const ALL_TIME = "all"

/** Who owns the holds this process takes: its configured name and this run of it, and how long a hold's lease lasts. */
export interface HoldOwner {
  readonly instanceId: string
  readonly bootId: string
  readonly leaseMs: number
}

export interface SpendContext {
  readonly sql: SqlClient.SqlClient
  readonly config: Settings
  /** A SQLite file: Spend's prepared statements on a connection of their own. Undefined on Postgres and an in-memory SQLite. */
  readonly direct: SqliteSpend | undefined
  /** Runs a write of `direct` beside the main connection (src/store/sqlite-client.ts), tried again while another process holds the lock. */
  readonly beside: <A>(write: () => A) => Effect.Effect<A, SqlError.SqlError>
  /** `direct`'s reservations, batched by turn of the event loop (src/services/reservations.ts); undefined without `direct`. */
  readonly reserveBatched: ((args: ReserveArgs) => Effect.Effect<ReserveOutcome>) | undefined
  readonly runPromise: <A, E>(effect: Effect.Effect<A, E>) => Promise<A>
  readonly owner: HoldOwner
  readonly generations: Pick<GenerationStore, "caughtUp" | "spoolStats" | "settling" | "flush">
}

/** What a hold depends on beyond the key: whether the request runs on the caller's own provider key (BYOK). */
export interface HoldOptions {
  readonly isByok: boolean
}

/** Whether a request on `key` counts toward the key's limit. */
export const chargesKeyOf = (key: KeyRow, options: HoldOptions): boolean => key.limit_usd !== null && (!options.isByok || key.include_byok_in_limit === 1)

/** Whether a request is held against its user's credits. */
export const chargesCreditsOf = (config: Settings, options: HoldOptions): boolean => config.creditsEnforced && !options.isByok
