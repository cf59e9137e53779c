/**
 * Wire shapes of presets and their immutable versions (contract operation 6 and the
 * supporting operations of wire-compat). A version body is a Responses request: it is
 * validated by the same decoder as POST /v1/responses, then split into `system_prompt`
 * (from `instructions`) and `config` (the rest, minus the per-request fields below).
 */
import { Either, Schema } from "effect"
import type { BadRequest } from "./errors.js"
import { PageParams } from "./paging.js"
import { decodeResponsesRequest, ResponsesRequest } from "./responses.js"

/** URL-safe: a lowercase letter or digit, then up to 99 of `a-z 0-9 . _ -`. */
export const SLUG_PATTERN = /^[a-z0-9][a-z0-9._-]{0,99}$/

export const PresetSlug = Schema.String.pipe(
  Schema.pattern(SLUG_PATTERN, {
    message: () => "must be 1 to 100 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit",
  }),
)

/** A decimal integer in a path or query string, checked before it becomes a number. */
const integerString = (message: string) =>
  Schema.String.pipe(Schema.pattern(/^-?\d{1,15}$/, { message: () => message }), Schema.compose(Schema.NumberFromString))

export const VersionNumber = integerString("must be a positive integer").pipe(
  Schema.greaterThanOrEqualTo(1, { message: () => "must be a positive integer" }),
)

export { PAGE_SIZE_DEFAULT, PAGE_SIZE_MAX } from "./paging.js"

/** Page size 1 to 100 (default 50) and offset ≥ 0 (default 0). */
export const ListVersionsParams = PageParams

export const SlugPath = Schema.Struct({ slug: PresetSlug })
export const VersionPath = Schema.Struct({ slug: PresetSlug, version: VersionNumber })

export const PresetStatus = Schema.Literal("active")

export const Preset = Schema.Struct({
  id: Schema.String,
  slug: Schema.String,
  name: Schema.String,
  description: Schema.String,
  status: PresetStatus,
  workspace_id: Schema.String,
  creator_user_id: Schema.String,
  /** The version requests use: always the latest. */
  designated_version_id: Schema.String,
  created_at: Schema.String,
  updated_at: Schema.String,
  status_updated_at: Schema.String,
})
export type Preset = typeof Preset.Type

export const PresetVersion = Schema.Struct({
  id: Schema.String,
  preset_id: Schema.String,
  version: Schema.Int,
  config: Schema.Record({ key: Schema.String, value: Schema.Unknown }),
  /** Always present; null when the version has no `instructions`. */
  system_prompt: Schema.NullOr(Schema.String),
  creator_id: Schema.String,
  created_at: Schema.String,
  /** Versions are immutable: equal to `created_at`, never null. */
  updated_at: Schema.String,
})
export type PresetVersion = typeof PresetVersion.Type

export const PresetWithVersion = Schema.Struct({ ...Preset.fields, designated_version: PresetVersion })

/** `GET /presets/{slug}`: the preset with its designated version (the official SDK requires it). */
export const PresetData = Schema.Struct({ data: PresetWithVersion })
export const PresetList = Schema.Struct({ data: Schema.Array(Preset), total_count: Schema.Int })
export const CreatedPresetVersion = Schema.Struct({ data: PresetWithVersion })
export const PresetVersionData = Schema.Struct({ data: PresetVersion })
export const PresetVersionList = Schema.Struct({ data: Schema.Array(PresetVersion), total_count: Schema.Int })

/**
 * Request fields that belong to one request, not to a reusable preset; they are dropped from
 * `config` (after validation). `instructions` is not here: it becomes `system_prompt`.
 */
export const PER_REQUEST_FIELDS = [
  "input",
  "stream",
  "store",
  "background",
  "previous_response_id",
  "session_id",
  "user",
  "safety_identifier",
  "debug",
  "preset",
] as const

type RequestEncoded = typeof ResponsesRequest.Encoded

/** What a version stores as `config`: the wire form of a Responses request, minus the above. */
export type PresetConfig = Omit<RequestEncoded, (typeof PER_REQUEST_FIELDS)[number] | "instructions">

export interface VersionBody {
  readonly systemPrompt: string | null
  readonly config: PresetConfig
}

const encodeRequest = Schema.encodeSync(ResponsesRequest)

/**
 * A version from the body of POST /presets/{slug}/responses: validated as a Responses request
 * (400 naming the field), stored in its canonical wire form (unknown keys are dropped).
 */
export const versionBodyFromRequest = (body: unknown): Either.Either<VersionBody, BadRequest> =>
  Either.map(decodeResponsesRequest(body), ({ input: _input, ...request }) => {
    // `input` is validated but never stored, so it is not encoded either.
    const wire: Record<string, unknown> = { ...encodeRequest(request) }
    for (const field of PER_REQUEST_FIELDS) delete wire[field]
    const { instructions, ...config } = wire
    return {
      systemPrompt: typeof instructions === "string" ? instructions : null,
      config: config as PresetConfig,
    }
  })
