/** Liveness and readiness, without credentials (for load balancers and orchestrators). */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Errors } from "../../domain/errors.js"

export class HealthApi extends HttpApiGroup.make("health")
  .add(HttpApiEndpoint.get("health", "/health").addSuccess(Schema.Struct({ status: Schema.Literal("ok") })))
  .add(
    HttpApiEndpoint.get("ready", "/ready")
      .addSuccess(
        Schema.Struct({
          status: Schema.Literal("ready"),
          store: Schema.String,
          /** With Redis configured: "degraded" while it is unreachable (the gateway serves on each process's own state). */
          redis: Schema.optional(Schema.Literal("ok", "degraded")),
          /** The ledger spool (docs/operations.md): generations answered while the database was away, not yet committed. */
          spool: Schema.Struct({ generations: Schema.Number, bytes: Schema.Number, age_seconds: Schema.Number }),
        }),
      )
      .addError(Errors.ServiceUnavailable),
  )
  .prefix("/v1") {}
