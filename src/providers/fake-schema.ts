/**
 * A small JSON value valid against a JSON Schema, for the fake provider's answers to
 * `text.format: json_schema`: every declared property, one item per array, the first enum or
 * const, numbers inside their bounds, strings from the reply text cut to their length limits.
 * Covers what structured-output schemas use (type, properties, required, items, prefixItems,
 * enum, const, anyOf/oneOf/allOf, $ref into the same schema, formats, bounds); `pattern` and
 * `not` are not solved. What a schema may ask for is bounded (`SchemaTooLarge`): the demo catalog
 * answers any key, and a `minLength` or `minItems` of a billion would otherwise grow one answer
 * until the process runs out of memory.
 */

export type Json = null | boolean | number | string | ReadonlyArray<Json> | { readonly [key: string]: Json }

type Node = { readonly [key: string]: unknown }

/** Deeper than this, recursive schemas get their smallest value (an empty array, null). */
const MAX_DEPTH = 12
/** The most characters of padding (`minLength`) one value may take. */
export const MAX_EXAMPLE_CHARS = 100_000
/** The most array items and object properties one value may take. */
export const MAX_EXAMPLE_NODES = 10_000

/** A schema that asks for more than the bounds above: the fake provider refuses it (a 400, the caller's schema). */
export class SchemaTooLarge extends Error {}

/** What is left of one value's bounds while it is built. */
interface Budget {
  chars: number
  nodes: number
}

const spend = (budget: Budget, chars: number, nodes: number, what: string): void => {
  budget.chars -= chars
  budget.nodes -= nodes
  if (budget.chars < 0 || budget.nodes < 0) {
    throw new SchemaTooLarge(
      `the schema asks for ${what}; the fake provider writes at most ${MAX_EXAMPLE_CHARS} characters and ${MAX_EXAMPLE_NODES} values an answer`,
    )
  }
}

const FORMATS: Record<string, string> = {
  "date-time": "2025-01-01T00:00:00Z",
  date: "2025-01-01",
  time: "00:00:00Z",
  email: "demo@example.com",
  uri: "https://example.com/",
  url: "https://example.com/",
  uuid: "00000000-0000-4000-8000-000000000000",
  ipv4: "127.0.0.1",
  ipv6: "::1",
  hostname: "example.com",
}

const isNode = (value: unknown): value is Node => typeof value === "object" && value !== null && !Array.isArray(value)

const numberOr = (value: unknown): number | undefined => (typeof value === "number" && Number.isFinite(value) ? value : undefined)

/** A `#…` JSON pointer into the root schema; undefined when it leads nowhere. */
const resolve = (root: unknown, ref: string): unknown => {
  if (!ref.startsWith("#")) return undefined
  let at: unknown = root
  for (const raw of ref.slice(1).split("/").slice(1)) {
    const key = decodeURIComponent(raw).replaceAll("~1", "/").replaceAll("~0", "~")
    if (!isNode(at) && !Array.isArray(at)) return undefined
    at = (at as Record<string, unknown>)[key]
  }
  return at
}

/** `allOf` members folded into one node: properties merged, required lists joined; nested past `MAX_DEPTH` (a member that refers to itself), left out. */
const mergeAll = (node: Node, root: unknown, depth = 0): Node => {
  const members = Array.isArray(node.allOf) && depth <= MAX_DEPTH ? node.allOf : []
  let merged: Record<string, unknown> = { ...node, allOf: undefined }
  for (const raw of members) {
    const member = isNode(raw) && typeof raw.$ref === "string" ? resolve(root, raw.$ref) : raw
    if (!isNode(member)) continue
    const flat = Array.isArray(member.allOf) ? mergeAll(member, root, depth + 1) : member
    merged = {
      ...flat,
      ...merged,
      properties: { ...(isNode(flat.properties) ? flat.properties : {}), ...(isNode(merged.properties) ? merged.properties : {}) },
      required: [...(Array.isArray(flat.required) ? flat.required : []), ...(Array.isArray(merged.required) ? merged.required : [])],
    }
  }
  return merged
}

const typeOf = (node: Node): string | undefined => {
  if (typeof node.type === "string") return node.type
  if (Array.isArray(node.type)) {
    const types = node.type.filter((t): t is string => typeof t === "string")
    return types.find((t) => t !== "null") ?? types[0]
  }
  if (isNode(node.properties) || Array.isArray(node.required)) return "object"
  if (node.items !== undefined || Array.isArray(node.prefixItems)) return "array"
  return undefined
}

/** A code-point-safe cut and pad of the reply to the string's length limits. */
const fitString = (text: string, node: Node, budget: Budget): string => {
  const format = typeof node.format === "string" && Object.hasOwn(FORMATS, node.format) ? FORMATS[node.format] : undefined
  let chars = Array.from(format ?? text)
  const max = numberOr(node.maxLength)
  const min = numberOr(node.minLength) ?? 0
  if (max !== undefined && chars.length > max) chars = chars.slice(0, max)
  if (chars.length >= min) return chars.join("")
  spend(budget, min - chars.length, 0, `a string of at least ${min} characters`)
  return chars.join("") + ".".repeat(min - chars.length)
}

/** 0 moved inside the bounds (draft-4 boolean exclusives too), then onto `multipleOf`. */
const fitNumber = (node: Node, integer: boolean): number => {
  const exMinFlag = node.exclusiveMinimum === true
  const exMaxFlag = node.exclusiveMaximum === true
  const lower = numberOr(node.exclusiveMinimum) ?? numberOr(node.minimum)
  const upper = numberOr(node.exclusiveMaximum) ?? numberOr(node.maximum)
  const lowerExclusive = numberOr(node.exclusiveMinimum) !== undefined || exMinFlag
  const upperExclusive = numberOr(node.exclusiveMaximum) !== undefined || exMaxFlag
  const step = numberOr(node.multipleOf)
  const unit = step ?? (integer ? 1 : undefined)
  const above = (v: number) => lower === undefined || (lowerExclusive ? v > lower : v >= lower)
  const below = (v: number) => upper === undefined || (upperExclusive ? v < upper : v <= upper)
  let value = 0
  if (!above(value) && lower !== undefined) {
    value = unit !== undefined ? Math.ceil(lower / unit) * unit : lowerExclusive ? (upper !== undefined ? (lower + upper) / 2 : lower + 1) : lower
    if (!above(value) && unit !== undefined) value += unit
  } else if (!below(value) && upper !== undefined) {
    value = unit !== undefined ? Math.floor(upper / unit) * unit : upperExclusive ? (lower !== undefined ? (lower + upper) / 2 : upper - 1) : upper
    if (!below(value) && unit !== undefined) value -= unit
  }
  return integer ? Math.round(value) : value
}

const build = (raw: unknown, root: unknown, text: string, depth: number, budget: Budget): Json => {
  if (raw === true || raw === undefined) return text
  if (!isNode(raw)) return null
  if ("const" in raw) return raw.const as Json
  if (Array.isArray(raw.enum) && raw.enum.length > 0) return raw.enum[0] as Json
  if (depth > MAX_DEPTH) return typeOf(raw) === "array" ? [] : null
  if (typeof raw.$ref === "string") {
    const target = resolve(root, raw.$ref)
    if (target !== undefined) return build(target, root, text, depth + 1, budget)
  }
  const node = Array.isArray(raw.allOf) ? mergeAll(raw, root) : raw
  for (const key of ["anyOf", "oneOf"] as const) {
    const branches = node[key]
    if (Array.isArray(branches) && branches.length > 0) {
      // The first branch that is not just null gives the more telling value.
      const branch = branches.find((b) => !(isNode(b) && b.type === "null")) ?? branches[0]
      return build(branch, root, text, depth + 1, budget)
    }
  }
  switch (typeOf(node)) {
    case "object": {
      const out: Record<string, Json> = {}
      const properties = isNode(node.properties) ? node.properties : {}
      const keys = Object.keys(properties)
      spend(budget, 0, keys.length, `an object of ${keys.length} properties`)
      for (const key of keys) out[key] = build(properties[key], root, text, depth + 1, budget)
      if (Array.isArray(node.required)) {
        for (const key of node.required) if (typeof key === "string" && !(key in out)) out[key] = text
      }
      return out
    }
    case "array": {
      const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : []
      const min = numberOr(node.minItems) ?? 0
      const max = numberOr(node.maxItems)
      let count = Math.max(min, prefix.length, depth > MAX_DEPTH / 2 ? 0 : 1)
      if (max !== undefined) count = Math.min(count, max)
      spend(budget, 0, count, `an array of at least ${count} items`)
      const out: Array<Json> = []
      for (let i = 0; i < count; i++) {
        const item = i < prefix.length ? prefix[i] : node.items
        const value = build(item === false ? undefined : item, root, text, depth + 1, budget)
        // uniqueItems: later copies of a string get their index, so items stay distinct.
        out.push(node.uniqueItems === true && i > 0 && typeof value === "string" ? `${value} ${i + 1}` : value)
      }
      return out
    }
    case "string":
      return fitString(text, node, budget)
    case "integer":
      return fitNumber(node, true)
    case "number":
      return fitNumber(node, false)
    case "boolean":
      return true
    case "null":
      return null
    default:
      return text
  }
}

/** A value valid against `schema`; its strings carry `text` (the fake's reply). Throws `SchemaTooLarge` past the bounds. */
export const schemaExample = (schema: unknown, text: string): Json =>
  build(schema, schema, text, 0, { chars: MAX_EXAMPLE_CHARS, nodes: MAX_EXAMPLE_NODES })
