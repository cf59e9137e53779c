import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ServiceUnavailable } from "../../domain/errors.js"
import { SharedState } from "../../services/SharedState.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { GatewayApi } from "../Api.js"

export const HealthLive = HttpApiBuilder.group(GatewayApi, "health", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const engine = sql.onDialectOrElse({ pg: () => "postgres", orElse: () => "sqlite" })
    const shared = yield* SharedState
    const generations = yield* GenerationStore
    /** What waits in the ledger spool: in the answer, and in a 503's metadata (an outage is when it grows). */
    const spoolFigures = () => {
      const spool = generations.spoolStats()
      return { full: spool.full, figures: { generations: spool.generations, bytes: spool.bytes, age_seconds: Math.round(spool.ageSeconds * 10) / 10 } }
    }
    return handlers
      .handle("health", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        sql`SELECT 1 AS one`.pipe(
          Effect.timeout("2 seconds"),
          Effect.catchAll(() =>
            Effect.fail(new ServiceUnavailable({ message: "The store is not reachable", retry_after: 5, metadata: { spool: spoolFigures().figures } })),
          ),
          Effect.flatMap(() => {
            const spool = spoolFigures()
            // At its bound the gateway refuses new requests until the spool drains: not ready.
            if (spool.full) {
              return Effect.fail(
                new ServiceUnavailable({
                  message: `The ledger spool is full (${spool.figures.generations} generations, ${spool.figures.bytes} bytes); requests are refused until it drains`,
                  retry_after: 5,
                  metadata: { spool: spool.figures },
                }),
              )
            }
            const redis = shared.status().redis
            return Effect.succeed({
              status: "ready" as const,
              store: engine,
              spool: spool.figures,
              ...(redis === "off" ? {} : { redis }),
            })
          }),
        ),
      )
  }),
)
