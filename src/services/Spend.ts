/**
 * Spending limits and credits (docs/operations.md, "Money and holds"): reserve the worst case before the call, settle the
 * actual after, on every path. The check and the reservation are one conditional UPDATE of the
 * key's row, atomic on SQLite and Postgres alike, so concurrent requests (and processes sharing
 * one database) can never together pass the limit by more than one request's reservation.
 * Keys without a limit cost no I/O here when credits are not enforced. On a SQLite file the
 * same statements run as prepared statements on a connection of their own (src/store/spend-sqlite.ts).
 * Money is integers of nano-dollars (src/domain/pricing.ts): the checks are exact sums.
 *
 * The service composes its parts, which share one `SpendContext` made here once
 * (src/services/spend-context.ts): a request's own hold and its settlement
 * (src/services/reservations.ts), the 402s that say what holds the money
 * (src/services/spend-refusals.ts), budget leases, which admit a limited key's requests in memory
 * against a slice of its budget (src/services/budget-leases.ts), and hold leases, which release
 * the holds of a process that died (src/services/hold-leases.ts).
 */
import { SqlClient } from "@effect/sql"
import { Effect, Runtime } from "effect"
import { GatewayConfig, isPostgresUrl } from "../config/Config.js"
import { besideMain, MainConnection } from "../store/sqlite-client.js"
import { openSqliteSpend, whenUnlocked } from "../store/spend-sqlite.js"
import * as BudgetLeases from "./budget-leases.js"
import { GenerationStore } from "./GenerationStore.js"
import { releaseOrphans, renewAndSweep, renewLeases, sweepExpired } from "./hold-leases.js"
import { type KeyRow, KeyStore } from "./KeyStore.js"
import { batchedOn, settle } from "./reservations.js"
import { type HoldOptions, chargesCreditsOf, chargesKeyOf, type SpendContext } from "./spend-context.js"
import type { Reservation } from "../store/settlement.js"

export type { Reservation } from "../store/settlement.js"

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
    const ctx: SpendContext = {
      sql,
      config,
      direct,
      beside,
      reserveBatched: direct === undefined ? undefined : batchedOn(direct, beside, runtime),
      runPromise: Runtime.runPromise(runtime),
      owner: lease,
      generations,
    }

    const leases = BudgetLeases.makeBudgetLeases(ctx)
    const revoke = (hash: string | undefined) => BudgetLeases.revoke(leases, hash)
    // A key's change (its limit, its window policy, a disable, a delete) revokes its slice here at once.
    keys.onChanged(revoke)
    const stopTimers = BudgetLeases.startTimers(leases)
    yield* Effect.addFinalizer(() => Effect.zipRight(Effect.sync(stopTimers), BudgetLeases.giveBackAll(leases)))

    const sweep = sweepExpired(ctx)
    const renew = renewLeases(ctx, leases)
    yield* renewAndSweep(ctx, leases, renew, sweep)

    /** Requests holding something (their own hold, or admitted against a slice), for tests and metrics. */
    const openReservations = sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM reservations WHERE is_slice = 0`.pipe(
      Effect.map((r) => Number(r[0]?.n ?? 0) + leases.admitted),
      Effect.orDie,
    )

    return {
      /** Whether a request on `key` holds anything: the key has a limit it counts toward, or credits are enforced. */
      holds: (key: KeyRow, options: HoldOptions) => chargesKeyOf(key, options) || chargesCreditsOf(config, options),
      admit: (key: KeyRow, worstCaseUsd: number, options: HoldOptions) => BudgetLeases.admit(leases, key, worstCaseUsd, options),
      reserve: (key: KeyRow, worstCaseUsd: number, options: HoldOptions) => BudgetLeases.reserve(leases, key, worstCaseUsd, options),
      settle: (reservation: Reservation, actualUsd: number) => settle(ctx, reservation, actualUsd),
      revoke,
      slices: () => BudgetLeases.slicesOf(leases),
      lease,
      renewLeases: renew,
      sweepExpired: sweep,
      releaseOrphans: releaseOrphans(ctx, sweep),
      openReservations,
    } as const
  }),
}) {}
