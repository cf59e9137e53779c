/** Generation records, their stored content and feedback: the contract's operation 7, `GET /generation`, `POST /generation/feedback`. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Errors } from "../../domain/errors.js"
import {
  FeedbackAccepted,
  FeedbackPayload,
  GenerationContentData,
  GenerationContentParams,
  GenerationData,
  GenerationIdParams,
} from "../../domain/generations.js"
import { Authentication } from "./security.js"

export class GenerationsApi extends HttpApiGroup.make("generations")
  .add(HttpApiEndpoint.get("get", "/generation").setUrlParams(GenerationIdParams).addSuccess(GenerationData))
  .add(HttpApiEndpoint.get("content", "/generation/content").setUrlParams(GenerationContentParams).addSuccess(GenerationContentData))
  .add(HttpApiEndpoint.post("feedback", "/generation/feedback").setPayload(FeedbackPayload).addSuccess(FeedbackAccepted))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
