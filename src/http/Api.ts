/**
 * The control plane as one HttpApi: a group per resource. It yields the OpenAPI document
 * (`GET /v1/openapi.json`) and the typed client tests use.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { AnyApiError } from "../domain/errors.js"
import { HealthApi } from "./api/health.js"
import { KeysApi } from "./api/keys.js"
import { GenerationsApi } from "./api/generations.js"
import { DestinationsApi } from "./api/destinations.js"
import { WorkspacesApi } from "./api/workspaces.js"
import { PresetsApi } from "./api/presets.js"
import { ModelsApi, ProvidersApi } from "./api/models.js"
import { ActivityApi } from "./api/activity.js"

export class GatewayApi extends HttpApi.make("gateway")
  .add(HealthApi)
  .add(KeysApi)
  .add(GenerationsApi)
  .add(DestinationsApi)
  .add(WorkspacesApi)
  .add(PresetsApi)
  .add(ModelsApi)
  .add(ProvidersApi)
  .add(ActivityApi)
  // Every error of the table (domain/errors.ts), so any of them encodes to the envelope.
  .addError(AnyApiError)
  .annotate(OpenApi.Title, "Model routing gateway")
  .annotate(OpenApi.Version, "1.0.0") {}
