/**
 * Model identifiers as callers write them: `vendor/model`, with a routing suffix (`:nitro`,
 * `:floor`, `:free`), and with a preset (`@preset/slug` alone, or `vendor/model@preset/slug`).
 * Plain string work; no catalog lookups beyond the one `known` callback.
 */

/** What a suffix asks for: a sort (`nitro`, `floor`) or a filter (`free`). */
export type ModelVariant = "nitro" | "floor" | "free"

const VARIANTS: ReadonlySet<string> = new Set<ModelVariant>(["nitro", "floor", "free"])

const PRESET_MARK = "@preset/"

export interface ModelRef {
  /** The catalog model id (suffix removed). */
  readonly id: string
  readonly variant: ModelVariant | undefined
}

export interface PresetSplit {
  /** The model part before `@preset/`, or undefined for `@preset/slug` alone. */
  readonly model: string | undefined
  /** The preset slug after `@preset/`, or undefined when the id names no preset. */
  readonly preset: string | undefined
}

/** Splits `vendor/model@preset/slug` and `@preset/slug`; other ids come back whole. */
export const splitPreset = (id: string): PresetSplit => {
  const at = id.indexOf(PRESET_MARK)
  if (at < 0) return { model: id, preset: undefined }
  return { model: at === 0 ? undefined : id.slice(0, at), preset: id.slice(at + PRESET_MARK.length) }
}

export const namesPreset = (id: string) => id.includes(PRESET_MARK)

/** Whether the catalog serves `id`, a routing suffix allowed (the check of a model id stored for later use). */
export const servesModel = (id: string, known: (id: string) => boolean): boolean => known(parseModelRef(id, known).id)

/**
 * The catalog model and variant of an id. An id the catalog knows as written wins (a catalog
 * may list `vendor/model:free` as a model of its own); otherwise a known suffix is split off.
 */
export const parseModelRef = (id: string, known: (id: string) => boolean): ModelRef => {
  if (known(id)) return { id, variant: undefined }
  const colon = id.lastIndexOf(":")
  if (colon > 0) {
    const suffix = id.slice(colon + 1)
    if (VARIANTS.has(suffix)) return { id: id.slice(0, colon), variant: suffix as ModelVariant }
  }
  return { id, variant: undefined }
}
