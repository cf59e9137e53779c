/**
 * Handlers of the models and providers groups: any authenticated key reads them. The directory
 * is built here over the Router the data plane reports to, so the endpoints listing shows the
 * statistics of the requests this process served.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Router } from "../../routing/Router.js"
import { Catalog } from "../../services/Catalog.js"
import { makeModelDirectory, needsUsage } from "../../services/ModelDirectory.js"
import { ModelUsage } from "../../services/ModelUsage.js"
import { GatewayApi } from "../Api.js"

const directory = Effect.gen(function* () {
  return makeModelDirectory(yield* Catalog, yield* Router)
})

export const ModelsLive = HttpApiBuilder.group(GatewayApi, "models", (handlers) =>
  Effect.gen(function* () {
    const models = yield* directory
    const usage = yield* ModelUsage
    return handlers
      // Only a popularity sort reads the ledger's usage (cached a minute): other listings read nothing.
      .handle("list", ({ urlParams }) =>
        needsUsage(urlParams) ? Effect.flatMap(usage.snapshot, (u) => models.list(urlParams, u)) : models.list(urlParams),
      )
      // The same listing, of the models that output embeddings (catalog models of kind "embedding").
      .handle("embeddingModels", ({ urlParams }) => {
        const params = { ...urlParams, output_modalities: "embeddings" }
        return needsUsage(params)
          ? Effect.flatMap(usage.snapshot, (u) => models.list(params, u, "/v1/embeddings/models"))
          : models.list(params, undefined, "/v1/embeddings/models")
      })
      .handle("count", ({ urlParams }) => Effect.succeed(models.count(urlParams)))
      .handle("listForUser", ({ urlParams }) => models.list(urlParams))
      .handle("zdr", () => Effect.succeed(models.zdrEndpoints()))
      .handle("get", ({ path }) => models.get(path.author, path.slug))
      .handle("endpoints", ({ path }) => models.endpoints(path.author, path.slug))
  }),
)

export const ProvidersLive = HttpApiBuilder.group(GatewayApi, "providers", (handlers) =>
  Effect.map(directory, (models) => handlers.handle("list", () => Effect.succeed(models.providers()))),
)
