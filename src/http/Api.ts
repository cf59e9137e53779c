/**
 * The control plane as one HttpApi: a group per resource. It yields the OpenAPI document
 * (`GET /v1/openapi.json`) and the typed client tests use.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { Errors } from "../domain/errors.js"
import { HealthApi } from "./api/health.js"
import { KeysApi } from "./api/keys.js"
import { GenerationsApi } from "./api/generations.js"
import { DestinationsApi } from "./api/destinations.js"
import { WorkspacesApi } from "./api/workspaces.js"
import { PresetsApi } from "./api/presets.js"
import { ModelsApi, ProvidersApi } from "./api/models.js"

export class GatewayApi extends HttpApi.make("gateway")
  .add(HealthApi)
  .add(KeysApi)
  .add(GenerationsApi)
  .add(DestinationsApi)
  .add(WorkspacesApi)
  .add(PresetsApi)
  .add(ModelsApi)
  .add(ProvidersApi)
  // Every error class is declared once here so any of them encodes to the envelope.
  .addError(Errors.BadRequest)
  .addError(Errors.Unauthorized)
  .addError(Errors.PaymentRequired)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .addError(Errors.MethodNotAllowed)
  .addError(Errors.RequestTimeout)
  .addError(Errors.Conflict)
  .addError(Errors.PayloadTooLarge)
  .addError(Errors.UnsupportedMediaType)
  .addError(Errors.Unprocessable)
  .addError(Errors.RateLimited)
  .addError(Errors.InternalError)
  .addError(Errors.NotImplemented)
  .addError(Errors.BadGateway)
  .addError(Errors.ServiceUnavailable)
  .addError(Errors.UpstreamTimeout)
  .addError(Errors.Overloaded)
  .annotate(OpenApi.Title, "Model routing gateway")
  .annotate(OpenApi.Version, "1.0.0") {}
