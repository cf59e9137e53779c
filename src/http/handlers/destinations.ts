/** Handlers of the destinations group: management keys only; they call Destinations, nothing more. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { requireManagement } from "../../services/Auth.js"
import { Broadcast } from "../../broadcast/Broadcast.js"
import type { DestinationType } from "../../broadcast/exporters/index.js"
import type { Destination } from "../../domain/destinations.js"
import { Destinations } from "../../services/Destinations.js"
import { GatewayApi } from "../Api.js"

/**
 * A destination as the API types it: its `type` one of the registry's kinds. The service has only
 * made such destinations, and the response's Schema checks it again on the way out.
 */
const listed = (destination: Destination) => destination as Destination & { readonly type: DestinationType }

export const DestinationsLive = HttpApiBuilder.group(GatewayApi, "destinations", (handlers) =>
  Effect.gen(function* () {
    const destinations = yield* Destinations
    const broadcast = yield* Broadcast
    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const page = yield* destinations.list(p.userId, urlParams.workspace_id, urlParams)
          return { data: page.data.map(listed), total_count: page.total_count }
        }),
      )
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          return { data: listed(yield* destinations.create(p, payload)) }
        }),
      )
      .handle("get", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          return { data: listed(yield* destinations.get(p.userId, path.id)) }
        }),
      )
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          return { data: listed(yield* destinations.update(p.userId, path.id, payload)) }
        }),
      )
      .handle("delete", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          yield* destinations.remove(p.userId, path.id)
          return { deleted: true as const }
        }),
      )
      .handle("test", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          return { data: yield* broadcast.test(p.userId, path.id) }
        }),
      )
      .handle("redeliver", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          return { data: { requeued: yield* broadcast.redeliver(p.userId, path.id) } }
        }),
      )
  }),
)
