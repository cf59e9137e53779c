/**
 * Handlers of the presets group: they check the caller and call PresetStore, nothing more.
 * Writes need a management key; reads take any key of the user (operation 6 lists no 403).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Either, Option } from "effect"
import { BadRequest, NotFound } from "../../domain/errors.js"
import { pageOf } from "../../domain/paging.js"
import { PAGE_SIZE_DEFAULT, type PresetConfig, type VersionBody, versionBodyFromRequest } from "../../domain/presets.js"
import { versionBodyFromChat } from "../../formats/chat/preset.js"
import { decodeMessagesPreset } from "../../formats/messages/request.js"
import { quote, clipped } from "../../domain/validation.js"
import { namesPreset, servesModel } from "../../routing/model-id.js"
import { Principal, requireManagement } from "../../services/Auth.js"
import { Catalog } from "../../services/Catalog.js"
import { decodePlugins } from "../../pipeline/plugins/index.js"
import { PresetStore } from "../../services/PresetStore.js"
import { GatewayApi } from "../Api.js"

const presetNotFound = (slug: string) => new NotFound({ message: `Preset ${clipped(slug)} not found` })

export const PresetsLive = HttpApiBuilder.group(GatewayApi, "presets", (handlers) =>
  Effect.gen(function* () {
    const presets = yield* PresetStore
    const catalog = yield* Catalog

    /** A preset naming a model the catalog does not serve would fail every request that uses it: refused at write. */
    const checkModels = (config: PresetConfig) => {
      const named: Array<[string, string]> = []
      if (config.model !== undefined) named.push(["model", config.model])
      for (const [i, id] of (config.models ?? []).entries()) named.push([`models[${i}]`, id])
      for (const [field, id] of named) {
        const rule = namesPreset(id)
          ? "names a preset; a preset's models are catalog models"
          : servesModel(id, (m) => catalog.model(m) !== undefined)
            ? undefined
            : "is not a model of this gateway's catalog"
        if (rule !== undefined) return Effect.fail(new BadRequest({ message: `Invalid request: ${field}: ${quote(id)} ${rule}` }))
      }
      return Effect.void
    }

    /** The config's `plugins` decoded by the plugins' Schemas (the domain leaves each entry to its plugin): stored as a request would carry them. */
    const withPluginsDecoded = (body: VersionBody): Either.Either<VersionBody, BadRequest> => {
      const entries = body.config.plugins
      if (entries === undefined) return Either.right(body)
      return Either.map(decodePlugins(entries), (plugins) => ({ ...body, config: { ...body.config, plugins } }))
    }

    /** The caller's preset; another user's is 404 like a missing one. */
    const ownPreset = (slug: string) =>
      Effect.gen(function* () {
        const p = yield* Principal
        const found = yield* presets.find(p.userId, slug)
        return yield* Option.match(found, { onNone: () => Effect.fail(presetNotFound(slug)), onSome: Effect.succeed })
      })

    /** A new version of the caller's preset `slug` (the preset made on the first), from a decoded body of any format. */
    const createVersion = (slug: string, decoded: Either.Either<VersionBody, BadRequest>) =>
      Effect.gen(function* () {
        const p = yield* requireManagement
        const body = yield* Either.flatMap(decoded, withPluginsDecoded)
        yield* checkModels(body.config)
        const { preset, version } = yield* presets.createVersion({
          userId: p.userId,
          workspaceId: p.workspaceId,
          slug,
          systemPrompt: body.systemPrompt,
          config: body.config,
        })
        return { data: { ...preset, designated_version: version } }
      })

    return handlers
      .handle("list", ({ urlParams }) => Effect.flatMap(Principal, (p) => Effect.map(presets.list(p.userId), (all) => pageOf(all, urlParams))))
      .handle("get", ({ path }) =>
        Effect.gen(function* () {
          const p = yield* Principal
          const found = yield* presets.findWithVersion(p.userId, path.slug)
          return yield* Option.match(found, {
            onNone: () => Effect.fail(presetNotFound(path.slug)),
            onSome: ({ preset, version }) => Effect.succeed({ data: { ...preset, designated_version: version } }),
          })
        }),
      )
      .handle("createVersion", ({ path, payload }) => createVersion(path.slug, versionBodyFromRequest(payload)))
      .handle("createVersionFromChat", ({ path, payload }) => createVersion(path.slug, versionBodyFromChat(payload)))
      .handle("createVersionFromMessages", ({ path, payload }) =>
        createVersion(path.slug, Either.flatMap(decodeMessagesPreset(payload), versionBodyFromRequest)),
      )
      .handle("listVersions", ({ path, urlParams }) =>
        Effect.gen(function* () {
          const preset = yield* ownPreset(path.slug)
          return yield* presets.versions(preset.id, {
            limit: urlParams.limit ?? PAGE_SIZE_DEFAULT,
            offset: urlParams.offset ?? 0,
          })
        }),
      )
      .handle("getVersion", ({ path }) =>
        Effect.gen(function* () {
          const preset = yield* ownPreset(path.slug)
          const found = yield* presets.version(preset.id, path.version)
          return yield* Option.match(found, {
            onNone: () => Effect.fail(new NotFound({ message: `Preset ${path.slug} has no version ${path.version}` })),
            onSome: (data) => Effect.succeed({ data }),
          })
        }),
      )
  }),
)
