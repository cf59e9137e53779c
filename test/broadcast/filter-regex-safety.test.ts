/**
 * A filter's regex runs on the one delivery Worker against caller-controlled text: a pattern that
 * can backtrack super-linearly is refused when a destination is created or changed, one stored
 * before the check never runs, and the text an accepted one sees is bounded.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { compileFilter, type FilterSubject, REGEX_TEXT_MAX } from "../../src/broadcast/filters.js"
import { destinationWire } from "../../src/domain/destinations.js"
import { regexProblem } from "../../src/domain/safe-regex.js"
import { makeDecoder } from "../../src/domain/validation.js"

const wire = destinationWire(["webhook"])
const decodeCreate = makeDecoder(wire.CreateDestinationPayload)
const decodeUpdate = makeDecoder(wire.UpdateDestinationPayload)

const withRegex = (pattern: string) => ({
  filter_rules: { enabled: true, groups: [{ logic: "and", rules: [{ field: "input", operator: "regex", value: pattern }] }] },
})

/** The 400 a create with this pattern gets, or undefined when it is accepted. */
const createRefusal = (pattern: string): string | undefined => {
  const decoded = decodeCreate({ name: "d", type: "webhook", config: { url: "https://hooks.example.com" }, ...withRegex(pattern) })
  return Either.isLeft(decoded) ? decoded.left.message : undefined
}

const HOSTILE = ["\\w*\\w*\\w*\\w*\\w*\\w*!", "(a|a)*b", "(a|aa)+$", "(.*a){12}"]
const ORDINARY = ["^gpt-4", "error|timeout", "\\d{3}-\\d{4}", "[a-z]+@example\\.com", "(foo|bar)baz"]

describe("a regex that can backtrack super-linearly is refused at create and update", () => {
  test.each(HOSTILE)("%s is a 400 naming the rule's value and why", (pattern) => {
    const message = createRefusal(pattern)
    expect(message).toStartWith("Invalid request: filter_rules.groups[0].rules[0].value: ")
    expect(message).toMatch(/exponential|polynomial/)
    const update = decodeUpdate(withRegex(pattern))
    expect(Either.isLeft(update) && update.left.status).toBe(400)
    expect(Either.isLeft(update) && update.left.message).toBe(message!)
  })

  test.each(ORDINARY)("%s is accepted", (pattern) => {
    expect(createRefusal(pattern)).toBeUndefined()
    expect(Either.isRight(decodeUpdate(withRegex(pattern)))).toBe(true)
  })

  test("a quantifier applies to one character or fixed text, never to a group with alternatives or a quantifier", () => {
    expect(regexProblem("(ab)+c")).toBeUndefined()
    expect(regexProblem("(\\d{3}-){2}\\d{4}")).toBeUndefined()
    expect(regexProblem("^err(or)?$")).toBeUndefined()
    expect(regexProblem("(a|b)*")).toContain("use a class such as [ab]*")
    expect(regexProblem("(?:x|y){2}")).toContain("group with alternatives")
    expect(regexProblem("(a+)+")).toContain("nests quantifiers")
  })

  test("two quantified parts that can match the same characters one after the other are refused, naming them", () => {
    expect(regexProblem("\\d+\\w+!")).toContain("has \\d+ then \\w+")
    expect(regexProblem("\\w+a\\w+!")).toContain("has \\w+ then \\w+")
    expect(regexProblem("[a-z]*\\d*[a-z]*!")).toContain("has [a-z]* then [a-z]*")
    expect(regexProblem("a?a?a?aaa")).toContain("has a? then a?")
    expect(regexProblem(".*a.*$")).toContain("has .* then .*")
    // Parts no character of which the other matches, or kept apart by one, are fine.
    expect(regexProblem("\\w*-\\w*!")).toBeUndefined()
    expect(regexProblem("\\s*\\S+!")).toBeUndefined()
    expect(regexProblem("\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}\\.\\d{1,3}")).toBeUndefined()
    // The match is found once the last part is reached: nothing after it can make it backtrack.
    expect(regexProblem(".*error.*")).toBeUndefined()
  })

  test("quantified parts, alike alternatives, lookarounds, backreferences and modifiers are bounded", () => {
    expect(regexProblem(Array.from({ length: 17 }, () => "\\w*").join("-"))).toContain("more than 16 quantified parts")
    expect(regexProblem("(?:a|a)(?:a|a)(?:a|a)\\w*!")).toContain("more than 4 combinations with a quantified part")
    expect(regexProblem("(?:a|ab)(?:c|cd)(?:e|ef)(?:g|gh)(?:i|ij)")).toContain("more than 16 combinations")
    expect(regexProblem("^(gpt-4|gpt-4o|gpt-4-turbo|gpt-3.5|gpt-5)")).toBeUndefined()
    expect(regexProblem("(?=\\w*!)")).toContain("inside a lookaround")
    expect(regexProblem("(?<=a)b(?!c)")).toBeUndefined()
    expect(regexProblem("(a)\\1")).toContain("backreference")
    expect(regexProblem("\\012")).toContain("octal escape")
    expect(regexProblem("(?i:a)*")).toContain("not allowed")
    expect(regexProblem("a".repeat(257))).toContain("longer than 256")
  })
})

describe("the Worker runs only patterns that pass the check, over bounded text", () => {
  const subject = (input: string): FilterSubject => ({
    model: "m",
    provider: "p",
    session_id: null,
    user_id: null,
    api_key_name: null,
    finish_reason: null,
    input,
    output: null,
    total_cost: 0,
    total_tokens: 0,
    prompt_tokens: 0,
    completion_tokens: 0,
  })
  const stored = (pattern: string) =>
    compileFilter({ enabled: true, groups: [{ logic: "and", rules: [{ field: "input", operator: "regex", value: pattern }] }] })

  // Stored before the check existed (so never through create): the rule does not match, and the
  // pattern never runs (the test's own timeout is the bound).
  test.each(HOSTILE)("%s stored before the check never matches 100,000 a's, and returns", (pattern) => {
    expect(stored(pattern)(subject("a".repeat(100_000)))).toBe(false)
  })

  test(`an accepted pattern sees the first ${REGEX_TEXT_MAX} characters of the text`, () => {
    const padded = (at: number) => subject(`${"a".repeat(at)}timeout`)
    expect(stored("error|timeout")(padded(REGEX_TEXT_MAX - "timeout".length))).toBe(true)
    expect(stored("error|timeout")(padded(REGEX_TEXT_MAX))).toBe(false)
    expect(stored("[a-z]+@example\\.com")(subject("a".repeat(100_000)))).toBe(false)
  })
})
