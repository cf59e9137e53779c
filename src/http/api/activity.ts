/**
 * Usage from the rollup and the generation log: `GET /activity` (the API family's, management
 * keys), `GET /activity/summary` (the console's charts) and `GET /generations` (the log, keyset
 * pagination). The last two answer an inference key too, for its own usage only.
 */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { ActivityParams, ActivityResponse, GenerationLog, LogParams, SummaryParams, UsageSummary } from "../../domain/activity.js"
import { Errors } from "../../domain/errors.js"
import { Authentication } from "./security.js"

export class ActivityApi extends HttpApiGroup.make("activity")
  .add(HttpApiEndpoint.get("activity", "/activity").setUrlParams(ActivityParams).addSuccess(ActivityResponse))
  .add(HttpApiEndpoint.get("summary", "/activity/summary").setUrlParams(SummaryParams).addSuccess(UsageSummary))
  .add(HttpApiEndpoint.get("log", "/generations").setUrlParams(LogParams).addSuccess(GenerationLog))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
