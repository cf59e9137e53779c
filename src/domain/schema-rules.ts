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

/** Code points in `text`: a character outside the Basic Multilingual Plane (an emoji) is one, though two UTF-16 units. */
const codePoints = (text: string): number => {
  let n = 0
  for (let i = 0; i < text.length; i++, n++) {
    const c = text.charCodeAt(i)
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1)
      if (d >= 0xdc00 && d <= 0xdfff) i++
    }
  }
  return n
}

/**
 * Whether `text` has at most `max` characters, counted as Unicode code points (a limit of 256
 * characters holds 256 emoji). Only a text longer in UTF-16 units than `max`, and at most twice
 * as long, is counted.
 */
export const withinChars = (text: string, max: number): boolean => text.length <= max || (text.length <= 2 * max && codePoints(text) <= max)

/** The Schema rule "at most `max` characters" (`withinChars`), with its message. */
export const charsAtMost =
  (max: number, message = `at most ${max} characters`) =>
  <A extends string, I, R>(self: Schema.Schema<A, I, R>): Schema.filter<Schema.Schema<A, I, R>> =>
    self.pipe(Schema.filter((text) => withinChars(text, max) || message))

export const maxChars = (max: number) => Schema.String.pipe(charsAtMost(max))

/**
 * C0 and C1 control characters, and the bidirectional overrides and isolates that reorder text
 * on screen (a name that reads as another in the console or a log line).
 */
const UNSHOWABLE = /[\u0000-\u001f\u007f-\u009f\u202a-\u202e\u2066-\u2069]/

/** The rule of a name people read (a key's, a workspace's, a destination's, a user id): not blank, nothing that hides or reorders it. */
export const showable = <A extends string, I, R>(self: Schema.Schema<A, I, R>): Schema.filter<Schema.Schema<A, I, R>> =>
  self.pipe(
    Schema.filter((text) =>
      UNSHOWABLE.test(text) ? "must not contain control characters or bidirectional overrides" : text.trim() === "" ? "must not be blank" : true,
    ),
  )

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
