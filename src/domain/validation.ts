/**
 * Turns a Schema decode failure into one message a caller can act on: the field's path and
 * the rule it broke, e.g. `metadata: at most 16 pairs` or `name: is missing`.
 */
import { ParseResult, type Schema } from "effect"
import { Either } from "effect"
import { BadRequest } from "./errors.js"

/** At most this many characters of a caller's value are quoted back in an error (a 1 MB value made a 1 MB 400). */
export const MAX_QUOTED = 200

/** `text` cut to `max` characters, an ellipsis marking the cut. */
export const clipped = (text: string, max = MAX_QUOTED): string => (text.length <= max ? text : `${text.slice(0, max)}…`)

/** A caller's string as an error message quotes it: in double quotes, at most MAX_QUOTED characters of it. */
export const quote = (value: string): string => `"${clipped(value)}"`

/** A rule's message with the value it quotes (`…, actual <value>`) cut to MAX_QUOTED characters. */
const clipRule = (message: string): string => {
  if (message.length <= MAX_QUOTED) return message
  const at = message.indexOf("actual ")
  return at < 0 ? clipped(message, MAX_QUOTED * 2) : `${message.slice(0, at + 7)}${clipped(message.slice(at + 7))}`
}

/**
 * The rule of an "Expected <type>, actual <value>" message in words where Effect names the type as
 * TypeScript would (`ReadonlyArray<string>`, `{ readonly a: … }`): a caller reads JSON, not types.
 */
const inWords = (message: string): string => {
  if (!message.startsWith("Expected ")) return message
  const end = message.lastIndexOf(", actual ")
  if (end < 0) return message
  const type = message.slice(9, end)
  const words =
    type === "ReadonlyArray<string>"
      ? "an array of strings"
      : type.startsWith("ReadonlyArray<")
        ? "an array"
        : type.startsWith("{ ")
          ? "an object"
          : undefined
  return words === undefined ? message : `Expected ${words}${message.slice(end)}`
}

const pathOf = (path: ReadonlyArray<PropertyKey>): string =>
  path.reduce<string>((acc, key) => {
    if (typeof key === "number") return `${acc}[${key}]`
    // Keys are the caller's too (metadata, image_config).
    return acc === "" ? clipped(String(key)) : `${acc}.${clipped(String(key))}`
  }, "")

/** One decode issue (ParseResult's ArrayFormatter shape, also HttpApi's) as `path: rule`. */
export const describeIssue = (issue: {
  readonly _tag: string
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}): string => {
  const path = pathOf(issue.path)
  // A body that is no object: the whole Struct's type is what Effect names (read before `inWords`, which would call it "an object").
  if (path === "" && issue.message.startsWith("Expected {")) return "the body must be a JSON object"
  const message =
    issue._tag === "Missing"
      ? "is missing"
      : issue._tag === "Unexpected"
        ? typeof issue.path[issue.path.length - 1] === "number"
          ? "unexpected element"
          : "unknown key"
        : clipRule(inWords(issue.message))
  return path === "" ? message : `${path}: ${message}`
}

/** The first issue of a parse error as `path: message` (path omitted for the root). */
export const describeParseError = (error: ParseResult.ParseError): string => {
  const first = ParseResult.ArrayFormatter.formatErrorSync(error)[0]
  return first === undefined ? "invalid value" : describeIssue(first)
}

export const badRequestFromParseError = (error: ParseResult.ParseError, prefix = "Invalid request"): BadRequest =>
  new BadRequest({ message: `${prefix}: ${describeParseError(error)}` })

/**
 * A decoder built once at module level (a Schema built per request costs ~6x) that
 * returns the value or a BadRequest naming the field and the rule.
 */
export const makeDecoder = <A, I>(schema: Schema.Schema<A, I>, prefix = "Invalid request") => {
  const decode = ParseResult.decodeUnknownEither(schema, { errors: "first", onExcessProperty: "ignore" })
  return (input: unknown): Either.Either<A, BadRequest> =>
    Either.mapLeft(decode(input), (issue) => badRequestFromParseError(new ParseResult.ParseError({ issue }), prefix))
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** A UUID as the gateway stores its ids (lower case); any other reference as it came. UUIDs are case-insensitive (RFC 9562). */
export const canonicalId = (ref: string): string => (ref.length === 36 && UUID.test(ref) ? ref.toLowerCase() : ref)
