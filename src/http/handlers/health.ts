import { HttpApiBuilder } from "@effect/platform"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ServiceUnavailable } from "../../domain/errors.js"
import { SharedState } from "../../services/SharedState.js"
import { GatewayApi } from "../Api.js"

export const HealthLive = HttpApiBuilder.group(GatewayApi, "health", (handlers) =>
  Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const engine = sql.onDialectOrElse({ pg: () => "postgres", orElse: () => "sqlite" })
    const shared = yield* SharedState
    return handlers
      .handle("health", () => Effect.succeed({ status: "ok" as const }))
      .handle("ready", () =>
        sql`SELECT 1 AS one`.pipe(
          Effect.timeout("2 seconds"),
          Effect.map(() => {
            const redis = shared.status().redis
            return redis === "off" ? { status: "ready" as const, store: engine } : { status: "ready" as const, store: engine, redis }
          }),
          Effect.catchAll(() => Effect.fail(new ServiceUnavailable({ message: "The store is not reachable", retry_after: 5 }))),
        ),
      )
  }),
)
