/** Observability destinations: the contract's operation 8 plus create, list, update, delete. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { DESTINATION_TYPES } from "../../broadcast/exporters/index.js"
import {
  DestinationIdPath,
  DestinationTestData,
  destinationWire,
  ListDestinationsParams,
  RedeliverData,
} from "../../domain/destinations.js"
import { Errors } from "../../domain/errors.js"
import { Deleted } from "../../domain/keys.js"
import { Authentication } from "./security.js"

// `type` is one of the registry's kinds (src/broadcast/exporters/index.ts).
const { CreateDestinationPayload, DestinationData, DestinationList, UpdateDestinationPayload } = destinationWire(DESTINATION_TYPES)

export class DestinationsApi extends HttpApiGroup.make("destinations")
  .add(
    HttpApiEndpoint.get("list", "/observability/destinations").setUrlParams(ListDestinationsParams).addSuccess(DestinationList),
  )
  .add(
    HttpApiEndpoint.post("create", "/observability/destinations")
      .setPayload(CreateDestinationPayload)
      .addSuccess(DestinationData, { status: 201 }),
  )
  .add(HttpApiEndpoint.get("get", "/observability/destinations/:id").setPath(DestinationIdPath).addSuccess(DestinationData))
  .add(
    HttpApiEndpoint.patch("update", "/observability/destinations/:id")
      .setPath(DestinationIdPath)
      .setPayload(UpdateDestinationPayload)
      .addSuccess(DestinationData),
  )
  .add(HttpApiEndpoint.del("delete", "/observability/destinations/:id").setPath(DestinationIdPath).addSuccess(Deleted))
  .add(HttpApiEndpoint.post("test", "/observability/destinations/:id/test").setPath(DestinationIdPath).addSuccess(DestinationTestData))
  .add(
    HttpApiEndpoint.post("redeliver", "/observability/destinations/:id/redeliver")
      .setPath(DestinationIdPath)
      .addSuccess(RedeliverData),
  )
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
