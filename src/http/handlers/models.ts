/**
 * Handlers of the models and providers groups: any authenticated key reads them. The directory
 * is built here over the Router the data plane reports to, so the endpoints listing shows the
 * statistics of the requests this process served.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { Router } from "../../routing/Router.js"
import { Catalog } from "../../services/Catalog.js"
import { makeModelDirectory } from "../../services/ModelDirectory.js"
import { GatewayApi } from "../Api.js"

const directory = Effect.gen(function* () {
  return makeModelDirectory(yield* Catalog, yield* Router)
})

export const ModelsLive = HttpApiBuilder.group(GatewayApi, "models", (handlers) =>
  Effect.map(directory, (models) =>
    handlers
      .handle("list", ({ urlParams }) => models.list(urlParams))
      // The same listing, of the models that output embeddings (catalog models of kind "embedding").
      .handle("embeddingModels", ({ urlParams }) => models.list({ ...urlParams, output_modalities: "embeddings" }, "/v1/embeddings/models"))
      .handle("count", ({ urlParams }) => Effect.succeed(models.count(urlParams)))
      .handle("get", ({ path }) => models.get(path.author, path.slug))
      .handle("endpoints", ({ path }) => models.endpoints(path.author, path.slug)),
  ),
)

export const ProvidersLive = HttpApiBuilder.group(GatewayApi, "providers", (handlers) =>
  Effect.map(directory, (models) => handlers.handle("list", () => Effect.succeed(models.providers()))),
)
