/** Generation records and their stored content: the contract's operation 7 and `GET /generation`. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Errors } from "../../domain/errors.js"
import { GenerationContentData, GenerationData, GenerationIdParams } from "../../domain/generations.js"
import { Authentication } from "./security.js"

export class GenerationsApi extends HttpApiGroup.make("generations")
  .add(HttpApiEndpoint.get("get", "/generation").setUrlParams(GenerationIdParams).addSuccess(GenerationData))
  .add(HttpApiEndpoint.get("content", "/generation/content").setUrlParams(GenerationIdParams).addSuccess(GenerationContentData))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
