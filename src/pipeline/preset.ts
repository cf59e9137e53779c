/**
 * The preset stage: `@preset/slug` as the model, `vendor/model@preset/slug`, or the field
 * `preset` builds the request from the caller's preset (routing/presets.ts merges it); the request
 * it leaves must have an input. A preset not in memory is `Missing` (loaded, then decided again).
 * The request it builds has its `plugins` decoded by the plugins' Schemas (`decodePlugins`), as
 * the body's were.
 */
import { Effect, Either, Option } from "effect"
import { BadRequest } from "../domain/errors.js"
import { missingInput, type ResponsesRequest } from "../domain/responses.js"
import { applyPreset, presetSlugOf } from "../routing/presets.js"
import type { PresetStore, ResolvedPreset } from "../services/PresetStore.js"
import { Missing, type PreModelStage } from "./stages.js"

export const makePresetStage = (presets: PresetStore, decodePlugins: (request: ResponsesRequest) => ResponsesRequest | BadRequest): PreModelStage => ({
  name: "preset",
  needsPlan: false,
  run: (state) => {
    const request = state.request
    const slug = presetSlugOf(request)
    if (slug instanceof BadRequest) return slug
    if (slug === undefined) {
      if (request.input === undefined && request.prompt === undefined) return missingInput(state.body)
      return undefined
    }
    const userId = state.principal.userId
    const had = state.loaded.preset
    const preset: ResolvedPreset | undefined =
      had !== undefined && had.userId === userId && had.slug === slug ? had.value : presets.peek(userId, slug)
    if (preset === undefined && had === undefined) {
      const loaded = state.loaded
      return new Missing(
        Effect.map(presets.resolve(userId, slug), (found) => {
          loaded.preset = { userId, slug, value: Option.getOrUndefined(found) }
        }),
      )
    }
    const format = state.format
    const own = format.ownFields === undefined ? (request as Record<string, unknown>) : format.ownFields(state.body, request)
    const withPreset = applyPreset(own, request, slug, preset)
    if (Either.isLeft(withPreset)) return withPreset.left
    const built = withPreset.right
    if (built.request.input === undefined && built.request.prompt === undefined) return missingInput(state.body)
    const withPlugins = decodePlugins(built.request)
    if (withPlugins instanceof BadRequest) return withPlugins
    return {
      request: withPlugins,
      hints: { preset: built.preset, requested: built.requested, ...(built.fromPreset === undefined ? {} : { fromPreset: built.fromPreset }) },
    }
  },
})
