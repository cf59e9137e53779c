/**
 * The messages between the thread that serves requests and the delivery Worker
 * (src/broadcast/delivery-worker.ts, src/broadcast/worker-host.ts). Both ends are this build's
 * code in one process (structured clone, no outside input), so they are plain types.
 */
import type { BroadcastSettings, Settings } from "../config/Config.js"
import type { Gate } from "../store/sqlite-gate.js"

/** What the Worker needs to deliver: its own connection, the settings, the secret key. */
export interface WorkerStart {
  readonly type: "start"
  readonly databaseUrl: string
  readonly pgPoolSize: number
  /** GATEWAY_SECRET_KEY if set; else the Worker reads the key file under `dataDir` (created at start by the main thread). */
  readonly secretKey: string | null
  readonly dataDir: string
  readonly allowPrivateAddresses: boolean
  readonly broadcast: BroadcastSettings
  readonly logLevel: Settings["logLevel"]
  /** A SQLite file's gate (src/store/sqlite-gate.ts); null on Postgres. */
  readonly gate: Gate | null
  /** Leases a dead Worker took: the rows it held are released first (else they wait out the lease). */
  readonly orphanLeases: ReadonlyArray<number>
}

export type ToWorker =
  | WorkerStart
  | { readonly type: "maintain"; readonly id: number }
  | { readonly type: "reset-breaker"; readonly destinationId: string }
  | { readonly type: "finish"; readonly deadline: number }
  /** The host has noted lease `id`: the claim that takes it may run. */
  | { readonly type: "lease-noted"; readonly id: number }

export type FromWorker =
  /** Started: the orphan leases are released. */
  | { readonly type: "ready" }
  /**
   * A claim is about to take this lease, once the host has noted it ("lease-noted"): Bun's
   * `terminate` drops messages a Worker posted just before it ended while its writes still land,
   * so a claim that did not wait could hold rows under a lease the host never heard of (they
   * waited out the lease, 2 × timeout + 5 s, instead of going to the next Worker at once).
   */
  | { readonly type: "lease"; readonly until: number; readonly id: number }
  /** Outcome counts since the last message (`kind\u0000outcome` → n), and the queue gauges as last counted. */
  | {
      readonly type: "stats"
      readonly outcomes: ReadonlyArray<readonly [string, number]>
      readonly pending: number
      readonly lagSeconds: number
    }
  | { readonly type: "maintained"; readonly id: number }
  | { readonly type: "finished" }
