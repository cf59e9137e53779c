/**
 * Handlers of the presets group: they check the caller and call PresetStore, nothing more.
 * Writes need a management key; reads take any key of the user (operation 6 lists no 403).
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { NotFound } from "../../domain/errors.js"
import { pageOf } from "../../domain/paging.js"
import { PAGE_SIZE_DEFAULT, versionBodyFromRequest } from "../../domain/presets.js"
import { Principal, requireManagement } from "../../services/Auth.js"
import { PresetStore } from "../../services/PresetStore.js"
import { GatewayApi } from "../Api.js"

const presetNotFound = (slug: string) => new NotFound({ message: `Preset ${slug} not found` })

export const PresetsLive = HttpApiBuilder.group(GatewayApi, "presets", (handlers) =>
  Effect.gen(function* () {
    const presets = yield* PresetStore

    /** The caller's preset; another user's is 404 like a missing one. */
    const ownPreset = (slug: string) =>
      Effect.gen(function* () {
        const p = yield* Principal
        const found = yield* presets.find(p.userId, slug)
        return yield* Option.match(found, { onNone: () => Effect.fail(presetNotFound(slug)), onSome: Effect.succeed })
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
      .handle("createVersion", ({ path, payload }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const body = yield* versionBodyFromRequest(payload)
          const { preset, version } = yield* presets.createVersion({
            userId: p.userId,
            workspaceId: p.workspaceId,
            slug: path.slug,
            systemPrompt: body.systemPrompt,
            config: body.config,
          })
          return { data: { ...preset, designated_version: version } }
        }),
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
