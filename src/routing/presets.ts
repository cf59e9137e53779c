/**
 * A request built from a preset: `@preset/slug` as the model, `vendor/model@preset/slug`, or
 * the request field `preset`. The caller's preset's designated (latest) version is the base;
 * the request's own fields override its config key by key (shallowly), and the version's
 * `system_prompt` becomes `instructions` when the request has none. The lookup is the preset
 * store's cached read; the merge is one more decode, paid only by preset requests.
 */
import { Either } from "effect"
import { BadRequest, NotFound } from "../domain/errors.js"
import { decodeResponsesRequest, type ResponsesRequest } from "../domain/responses.js"
import { quote } from "../domain/validation.js"
import type { ResolvedPreset } from "../services/PresetStore.js"
import { namesPreset, splitPreset } from "./model-id.js"

export interface WithPreset {
  readonly request: ResponsesRequest
  /** The slug of the preset applied, if any. */
  readonly preset: string | undefined
  /** The model as the caller wrote it (e.g. `@preset/slug`), for `service_metadata.requested`. */
  readonly requested: string | undefined
  /** Which of `model` and `models` the preset's config gave (the request did not). */
  readonly fromPreset?: { readonly model: boolean; readonly models: boolean }
}

/** Which preset a request names, or an error for a contradiction. */
export const presetOf = (request: ResponsesRequest): { readonly slug: string | undefined; readonly model: string | undefined } | BadRequest => {
  const split = request.model === undefined ? { model: undefined, preset: undefined } : splitPreset(request.model)
  if (split.preset === "") {
    return new BadRequest({ message: `Invalid request: model: ${quote(request.model ?? "")} names no preset after @preset/` })
  }
  if (split.preset !== undefined && request.preset !== undefined && split.preset !== request.preset) {
    return new BadRequest({
      message: `Invalid request: preset: ${quote(request.preset)} contradicts the preset ${quote(split.preset)} named in model`,
    })
  }
  return { slug: request.preset ?? split.preset, model: split.model }
}

/** The slug of the preset a request names (undefined: none), or an error for a contradiction. */
export const presetSlugOf = (request: ResponsesRequest): string | undefined | BadRequest => {
  if (request.preset === undefined && (request.model === undefined || !namesPreset(request.model))) return undefined
  const named = presetOf(request)
  return named instanceof BadRequest ? named : named.slug
}

/**
 * The request with its preset applied (`found`: the caller's preset named by `slug`, or
 * undefined when it does not exist); a request naming none comes back as it is, at no cost.
 */
export const applyPreset = (
  body: Record<string, unknown>,
  request: ResponsesRequest,
  slug: string | undefined,
  found: ResolvedPreset | undefined,
): Either.Either<WithPreset, BadRequest | NotFound> => {
  if (slug === undefined) return Either.right({ request, preset: undefined, requested: undefined })
  if (found === undefined) {
    return Either.left(
      new NotFound({ message: `Preset ${quote(slug)} does not exist (named by ${request.preset === undefined ? "model" : "preset"})` }),
    )
  }
  const { model: _model, preset: _preset, ...own } = body
  const merged: Record<string, unknown> = { ...found.version.config, ...own }
  // `vendor/model@preset/slug` (or `model` beside `preset`) names the model; `@preset/slug` takes the preset's.
  const named = presetOf(request)
  if (!(named instanceof BadRequest) && named.model !== undefined) merged["model"] = named.model
  if (merged["instructions"] == null && found.version.system_prompt !== null) merged["instructions"] = found.version.system_prompt
  const fromPreset = {
    model: (named instanceof BadRequest || named.model === undefined) && found.version.config.model !== undefined,
    models: own["models"] === undefined && found.version.config.models !== undefined,
  }
  return Either.map(decodeResponsesRequest(merged), (decoded) => ({
    request: decoded,
    preset: slug,
    requested: request.model ?? decoded.model,
    fromPreset,
  }))
}
