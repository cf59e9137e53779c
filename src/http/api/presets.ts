/**
 * Presets and their versions: the contract's operation 6 (list versions) plus the supporting
 * operations of wire-compat (create a version, list and get presets, get one version).
 */
import { HttpApiEndpoint, HttpApiGroup, OpenApi } from "@effect/platform"
import { Schema } from "effect"
import { Errors } from "../../domain/errors.js"
import { PageParams } from "../../domain/paging.js"
import {
  CreatedPresetVersion,
  ListVersionsParams,
  PresetData,
  PresetList,
  PresetVersionData,
  PresetVersionList,
  SlugPath,
  VersionPath,
} from "../../domain/presets.js"
import { Authentication } from "./security.js"

/** A Responses request; decoded by the handler with the same rules as POST /v1/responses. */
const VersionPayload = Schema.Unknown.annotations({
  description: "A Responses request (the body of POST /v1/responses); instructions become system_prompt",
})

/** A Chat Completions request; decoded by the handler with the same rules as POST /v1/chat/completions. */
const ChatVersionPayload = Schema.Unknown.annotations({
  description: "A Chat Completions request (the body of POST /v1/chat/completions); system messages become system_prompt",
})

/** An Anthropic Messages body; decoded by the handler with the same rules as POST /v1/messages (none required). */
const MessagesVersionPayload = Schema.Unknown.annotations({
  description: "An Anthropic Messages request (the body of POST /v1/messages); system becomes system_prompt",
})

export class PresetsApi extends HttpApiGroup.make("presets")
  .add(HttpApiEndpoint.get("list", "/presets").setUrlParams(PageParams).addSuccess(PresetList))
  .add(HttpApiEndpoint.get("get", "/presets/:slug").setPath(SlugPath).addSuccess(PresetData))
  .add(
    HttpApiEndpoint.post("createVersion", "/presets/:slug/responses")
      .setPath(SlugPath)
      .setPayload(VersionPayload)
      .addSuccess(CreatedPresetVersion)
      .annotate(OpenApi.Description, "Creates the preset on the first call and a new immutable version on each later call"),
  )
  .add(
    HttpApiEndpoint.post("createVersionFromChat", "/presets/:slug/chat/completions")
      .setPath(SlugPath)
      .setPayload(ChatVersionPayload)
      .addSuccess(CreatedPresetVersion)
      .annotate(OpenApi.Description, "As /presets/{slug}/responses, from a Chat Completions body"),
  )
  .add(
    HttpApiEndpoint.post("createVersionFromMessages", "/presets/:slug/messages")
      .setPath(SlugPath)
      .setPayload(MessagesVersionPayload)
      .addSuccess(CreatedPresetVersion)
      .annotate(OpenApi.Description, "As /presets/{slug}/responses, from an Anthropic Messages body; system becomes system_prompt"),
  )
  .add(
    HttpApiEndpoint.get("listVersions", "/presets/:slug/versions")
      .setPath(SlugPath)
      .setUrlParams(ListVersionsParams)
      .addSuccess(PresetVersionList),
  )
  .add(HttpApiEndpoint.get("getVersion", "/presets/:slug/versions/:version").setPath(VersionPath).addSuccess(PresetVersionData))
  .addError(Errors.BadRequest)
  .addError(Errors.Forbidden)
  .addError(Errors.NotFound)
  .middleware(Authentication)
  .prefix("/v1") {}
