/**
 * The rule helpers of the request Schemas (Responses, Chat Completions, Messages): each names
 * the rule a caller broke in the words the 400 quotes.
 */
import { Schema } from "effect"

/** A message that replaces whatever the inner schemas would say (unions of literals need it). */
export const rule = (message: string) => ({ message: () => ({ message, override: true }) })

export const oneOf = <const L extends readonly [string, ...Array<string>]>(...values: L) =>
  Schema.Literal(...values).annotations(rule(`one of ${values.join(", ")}`))

export const nullableOneOf = <const L extends readonly [string, ...Array<string>]>(...values: L) =>
  Schema.NullOr(Schema.Literal(...values)).annotations(rule(`one of ${values.join(", ")}, or null`))

export const maxChars = (max: number) =>
  Schema.String.pipe(Schema.maxLength(max, { message: () => `at most ${max} characters` }))

export const nonEmpty = Schema.String.pipe(Schema.minLength(1, { message: () => "must not be empty" }))

export const intBetween = (min: number, max: number) =>
  Schema.Int.pipe(Schema.between(min, max, { message: () => `an integer from ${min} to ${max}` }))

export const intAtLeast = (min: number) =>
  Schema.Int.pipe(Schema.greaterThanOrEqualTo(min, { message: () => `an integer of at least ${min}` }))

export const numberBetween = (min: number, max: number) =>
  Schema.Number.pipe(Schema.between(min, max, { message: () => `a number from ${min} to ${max}` }))

export const nullable = <S extends Schema.Schema.Any>(schema: S) => Schema.optional(Schema.NullOr(schema))

export const AnyRecord = Schema.Record({ key: Schema.String, value: Schema.Unknown })

/**
 * A value that must be an object before a union of object shapes is tried: a non-object gets
 * `what` as its message instead of the union's full type dump.
 */
export const objectOf = <A, I, R>(what: string, union: Schema.Schema<A, I, R>) =>
  // AnyRecord, not Schema.Object: an array is no object here (`tool_choice: []` read "type: is missing").
  Schema.compose(AnyRecord.annotations(rule(what)), union, { strict: false })

/** `type` of an item or tool this service does not model field by field (decoded, then judged). */
export const otherKind = (known: ReadonlySet<string>) =>
  Schema.String.pipe(Schema.filter((t) => !known.has(t), { message: () => "a kind not modelled above" }))
