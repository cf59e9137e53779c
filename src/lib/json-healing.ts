/**
 * JSON healing: a model's text that should be JSON, extracted from code fences or prose and
 * repaired (jsonrepair), then judged (a JSON object, or valid against a schema compiled by ajv).
 * A client's schema is untrusted: size cap, strict compile, no pattern that can backtrack
 * catastrophically. Used by the response-healing plugin (src/pipeline/plugins/response-healing.ts)
 * and by fusion's judge (src/tools/fusion-core.ts), so it lives below both.
 * ajv and jsonrepair are loaded by the first caller that needs them (`loadHealing`), not at start.
 */
import { createHash } from "node:crypto"
import { regexProblem } from "../domain/safe-regex.js"
import type { default as AjvClass, ValidateFunction } from "ajv"

/** The largest client schema compiled (its JSON text). */
export const MAX_SCHEMA_BYTES = 64 * 1024
/** The longest `pattern` accepted in a client schema. */
export const MAX_PATTERN_CHARS = 512
/**
 * The longest text repaired: jsonrepair runs on the request thread at ~7 MB/s, and a 3.9 MB
 * answer held every request for 533 ms. Longer text is judged as it is (unrepaired).
 */
export const MAX_REPAIR_CHARS = 512 * 1024
/** Compiled validators kept (least recently used dropped first). */
const VALIDATOR_CACHE = 256

/** What the answer must be: valid against a schema, or any JSON object. */
export type Mode = "json_schema" | "json_object"

interface Libraries {
  readonly ajv: AjvClass
  readonly jsonrepair: (text: string) => string
}

/**
 * Loaded by the first request that asks for healing (`loadHealing`, through the pre-model stage's
 * `Missing`). Not at start: a gateway that had loaded them (and made the ajv instance) spent ~3 %
 * more CPU on every JSON answer, healed or not (`scripts/bench` A/B, bench/NOTES.md).
 */
export let libraries: Libraries | undefined

/** The one load, shared by the requests that wait on it. */
let loading: Promise<void> | undefined

/** Loads ajv and jsonrepair once (the tests call it before using `heal` and `validatorOf`). */
export const loadHealing = (): Promise<void> =>
  (loading ??= Promise.all([import("ajv"), import("jsonrepair")]).then(([{ default: Ajv }, { jsonrepair }]) => {
    // strictSchema: an unknown keyword is refused rather than silently ignored; formats are not
    // validated (no format plugin), so `format` is accepted as an annotation.
    const ajv = new Ajv({ strict: true, strictTypes: false, strictTuples: false, strictRequired: false, validateFormats: false, allErrors: false })
    libraries = { ajv, jsonrepair }
  }))

const loaded = (): Libraries => {
  if (libraries === undefined) throw new Error("response-healing's libraries are used before loadHealing")
  return libraries
}

/** sha256 of the schema's JSON text → its compiled validator, bounded (a Map keeps insertion order). */
const validators = new Map<string, ValidateFunction>()

/**
 * A pattern of the caller's schema runs on the model's answer on the thread that serves requests:
 * one that can backtrack super-linearly (`\w*\w*\w*\w*\w*!` took 0.6 s over 80 characters, and
 * grows as their fifth power) would stop every request. Only shapes that cannot are run
 * (`regexProblem`, src/domain/safe-regex.ts); the rest are refused, never run.
 */
export const unsafePattern = (pattern: string): string | undefined => {
  if (pattern.length > MAX_PATTERN_CHARS) return `a pattern of at most ${MAX_PATTERN_CHARS} characters`
  const problem = regexProblem(pattern, MAX_PATTERN_CHARS)
  return problem === undefined ? undefined : `a pattern that cannot backtrack catastrophically; this one ${problem}`
}

/** The first unsafe pattern in `schema` (`pattern`, `patternProperties` keys), as path and rule. */
const findUnsafePattern = (value: unknown, path: string, depth: number): string | undefined => {
  if (depth > 64) return `${path}: nested at most 64 levels`
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = findUnsafePattern(value[i], `${path}[${i}]`, depth + 1)
      if (found !== undefined) return found
    }
    return undefined
  }
  if (typeof value !== "object" || value === null) return undefined
  for (const [key, inner] of Object.entries(value)) {
    if (key === "pattern" && typeof inner === "string") {
      const rule = unsafePattern(inner)
      if (rule !== undefined) return `${path}.pattern: ${rule}`
    }
    if (key === "patternProperties" && typeof inner === "object" && inner !== null) {
      for (const p of Object.keys(inner)) {
        const rule = unsafePattern(p)
        if (rule !== undefined) return `${path}.patternProperties: ${rule}`
      }
    }
    const found = findUnsafePattern(inner, `${path}.${key}`, depth + 1)
    if (found !== undefined) return found
  }
  return undefined
}

/** The schema's validator (compiled once per distinct schema), or the rule it broke. */
export const validatorOf = (schema: Record<string, unknown>, path: string): ValidateFunction | string => {
  const text = JSON.stringify(schema)
  if (Buffer.byteLength(text, "utf8") > MAX_SCHEMA_BYTES) return `${path}: a schema of at most ${MAX_SCHEMA_BYTES} bytes for response-healing`
  const hash = createHash("sha256").update(text).digest("hex")
  const cached = validators.get(hash)
  if (cached !== undefined) {
    validators.delete(hash)
    validators.set(hash, cached)
    return cached
  }
  const unsafe = findUnsafePattern(schema, path, 0)
  if (unsafe !== undefined) return unsafe
  // Outside the try: libraries not loaded is the gateway's fault, not a schema that does not compile.
  const { ajv } = loaded()
  let compiled: ValidateFunction
  try {
    // Compiled without $id (ajv would keep each id for good and refuse a second with it) and
    // without $schema (a client's draft URI is not a reason to refuse its schema).
    const { $id: _id, $schema: _draft, ...anonymous } = schema
    compiled = ajv.compile(anonymous)
  } catch (e) {
    return `${path}: a JSON Schema response-healing can compile (${(e as Error).message})`
  }
  if (validators.size >= VALIDATOR_CACHE) validators.delete(validators.keys().next().value as string)
  validators.set(hash, compiled)
  return compiled
}

// ---------------------------------------------------------------------------------------------
// Healing the text
// ---------------------------------------------------------------------------------------------

export interface Healed {
  readonly text: string
  readonly changed: boolean
  readonly valid: boolean
}

const FENCE = /```(?:json|JSON)?[ \t]*\r?\n?([\s\S]*?)```/

/** The JSON in `text`: a fenced block, else from the first `{`/`[` to the last `}`/`]`, else the text. */
export const extractJson = (text: string): string => {
  const fenced = FENCE.exec(text)
  if (fenced?.[1] !== undefined && fenced[1].trim() !== "") return fenced[1].trim()
  const open = text.search(/[{[]/)
  if (open < 0) return text.trim()
  const close = Math.max(text.lastIndexOf("}"), text.lastIndexOf("]"))
  return close > open ? text.slice(open, close + 1) : text.slice(open)
}

const parses = (text: string): { readonly ok: true; readonly value: unknown } | { readonly ok: false } => {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch {
    return { ok: false }
  }
}

/** `text` healed for `mode`; `validate`: the schema's validator (json_schema). */
export const heal = (text: string, mode: Mode, validate: ValidateFunction | undefined): Healed => {
  const judge = (value: unknown) =>
    mode === "json_object" ? typeof value === "object" && value !== null && !Array.isArray(value) : validate === undefined || validate(value) === true
  const direct = parses(text)
  if (direct.ok) return { text, changed: false, valid: judge(direct.value) }
  // No object or array in it: prose is not turned into a JSON string of itself.
  if (!/[{[]/.test(text) || text.length > MAX_REPAIR_CHARS) return { text, changed: false, valid: false }
  const { jsonrepair } = loaded()
  const extracted = extractJson(text)
  // Prose that ends in a bare `{` or `[` (the extract a lone bracket, which repairs to an empty one):
  // no JSON the model wrote, and the prose would be lost.
  if (extracted.trim().length === 1 && text.trim() !== extracted.trim()) return { text, changed: false, valid: false }
  let repaired: string
  try {
    repaired = jsonrepair(extracted)
  } catch {
    return { text, changed: false, valid: false }
  }
  const parsed = parses(repaired)
  if (!parsed.ok) return { text, changed: false, valid: false }
  return { text: repaired, changed: repaired !== text, valid: judge(parsed.value) }
}
