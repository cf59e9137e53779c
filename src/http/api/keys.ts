/** API keys, the calling key, and credits: the contract's operations 2 and 3 plus the supporting ones. */
import { HttpApiEndpoint, HttpApiGroup } from "@effect/platform"
import { Schema } from "effect"
import { Errors } from "../../domain/errors.js"
import {
  CreatedKey,
  CreateKeyPayload,
  Credits,
  CurrentKey,
  Deleted,
  KeyData,
  KeyList,
  ListKeysParams,
  UpdateKeyPayload,
} from "../../domain/keys.js"
import { Authentication } from "./security.js"

const HashPath = Schema.Struct({ hash: Schema.String })

export class KeysApi extends HttpApiGroup.make("keys")
  .add(HttpApiEndpoint.get("list", "/keys").setUrlParams(ListKeysParams).addSuccess(KeyList))
  .add(HttpApiEndpoint.post("create", "/keys").setPayload(CreateKeyPayload).addSuccess(CreatedKey, { status: 201 }))
  .add(HttpApiEndpoint.get("get", "/keys/:hash").setPath(HashPath).addSuccess(KeyData))
  .add(HttpApiEndpoint.patch("update", "/keys/:hash").setPath(HashPath).setPayload(UpdateKeyPayload).addSuccess(KeyData))
  .add(HttpApiEndpoint.del("delete", "/keys/:hash").setPath(HashPath).addSuccess(Deleted))
  .add(HttpApiEndpoint.get("current", "/key").addSuccess(CurrentKey))
  .add(HttpApiEndpoint.get("credits", "/credits").addSuccess(Credits))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
