/**
 * Models and providers: `GET /models`, `/models/count`, `/models/user`, `/model/{author}/{slug}`,
 * `/models/{author}/{slug}/endpoints`, `/embeddings/models` (the embedding models), `/endpoints/zdr`
 * and `/providers`, the shapes the official SDK's `models.*`, `endpoints.*` and `providers.list` read.
 * Any key may read them.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Errors } from "../../domain/errors.js"
import {
  CountModelsParams,
  EndpointList,
  ListModelsParams,
  ModelCount,
  ModelList,
  ModelOne,
  ModelPath,
  NoParams,
  ProviderList,
  UserModelsParams,
  ZdrEndpointList,
} from "../../domain/models.js"
import { Authentication } from "./security.js"

export class ModelsApi extends HttpApiGroup.make("models")
  .add(HttpApiEndpoint.get("list", "/models").setUrlParams(ListModelsParams).addSuccess(ModelList))
  .add(HttpApiEndpoint.get("embeddingModels", "/embeddings/models").setUrlParams(ListModelsParams).addSuccess(ModelList))
  .add(HttpApiEndpoint.get("count", "/models/count").setUrlParams(CountModelsParams).addSuccess(ModelCount))
  .add(HttpApiEndpoint.get("listForUser", "/models/user").setUrlParams(UserModelsParams).addSuccess(ModelList))
  .add(HttpApiEndpoint.get("zdr", "/endpoints/zdr").setUrlParams(NoParams).addSuccess(ZdrEndpointList))
  .add(HttpApiEndpoint.get("get", "/model/:author/:slug").setPath(ModelPath).setUrlParams(NoParams).addSuccess(ModelOne))
  .add(
    HttpApiEndpoint.get("endpoints", "/models/:author/:slug/endpoints")
      .setPath(ModelPath)
      .setUrlParams(NoParams)
      .addSuccess(EndpointList),
  )
  .addError(Errors.BadRequest)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}

export class ProvidersApi extends HttpApiGroup.make("providers")
  .add(HttpApiEndpoint.get("list", "/providers").setUrlParams(NoParams).addSuccess(ProviderList))
  .addError(Errors.BadRequest)
  .middleware(Authentication)
  .prefix("/v1") {}
