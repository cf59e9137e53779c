/**
 * A destination's `filter_rules`, compiled once per destination version: groups of rules, `and`
 * or `or` within a group, groups OR'ed together; disabled rules (or no rule at all) match every
 * generation. Regexes are tenant input: checked (`regexProblem`: a shape that cannot backtrack
 * super-linearly) and compiled once; one that fails the check, stored before it existed, never
 * runs and never matches.
 */
import type { FilterRules } from "../domain/destinations.js"
import { regexProblem } from "../domain/safe-regex.js"

/** The fields a rule can name, for one generation (content absent in privacy mode). */
export interface FilterSubject {
  readonly model: string
  readonly provider: string
  readonly session_id: string | null
  readonly user_id: string | null
  readonly api_key_name: string | null
  readonly finish_reason: string | null
  readonly input: string | null
  readonly output: string | null
  readonly total_cost: number
  readonly total_tokens: number
  readonly prompt_tokens: number
  readonly completion_tokens: number
}

/**
 * A regex sees the first this many characters of a field. Even a pattern the check accepts is
 * tried from every start position, so its time grows with the square of the text: on one line of
 * JSON, `.*error` took 4 s over 64 KB and 75 ms over 8 KB, on the one Worker every tenant's
 * delivery shares.
 */
export const REGEX_TEXT_MAX = 8192

type Rule = FilterRules["groups"][number]["rules"][number]
type Test = (subject: FilterSubject) => boolean

const present = (v: unknown) => v !== null && v !== undefined && v !== ""

const compileRule = (rule: Rule): Test => {
  const field = rule.field as keyof FilterSubject
  const value = rule.value
  const text = (s: FilterSubject): string | null => {
    const v = s[field]
    return v === null || v === undefined ? null : String(v)
  }
  const num = (s: FilterSubject): number | null => {
    const v = s[field]
    if (typeof v === "number") return v
    if (typeof v === "string" && v.trim() !== "" && Number.isFinite(Number(v))) return Number(v)
    return null
  }
  const needle = value === null || value === undefined ? "" : String(value)
  switch (rule.operator) {
    case "exists":
      return (s) => present(s[field])
    case "not_exists":
      return (s) => !present(s[field])
    case "equals":
      return typeof value === "number" ? (s) => num(s) === value : (s) => text(s) === needle
    case "not_equals":
      return typeof value === "number" ? (s) => num(s) !== value : (s) => text(s) !== needle
    case "contains":
      return (s) => text(s)?.includes(needle) ?? false
    case "not_contains":
      return (s) => !(text(s)?.includes(needle) ?? false)
    case "starts_with":
      return (s) => text(s)?.startsWith(needle) ?? false
    case "ends_with":
      return (s) => text(s)?.endsWith(needle) ?? false
    case "regex": {
      if (regexProblem(needle) !== undefined) return () => false
      const re = new RegExp(needle)
      return (s) => {
        const t = text(s)
        return t !== null && re.test(t.slice(0, REGEX_TEXT_MAX))
      }
    }
    case "gt":
    case "lt":
    case "gte":
    case "lte": {
      const bound = Number(value)
      const op = rule.operator
      return (s) => {
        const n = num(s)
        if (n === null) return false
        return op === "gt" ? n > bound : op === "lt" ? n < bound : op === "gte" ? n >= bound : n <= bound
      }
    }
  }
}

/** A predicate over generations; null rules match everything. */
/** The test of a destination without rules: callers skip building the subject for it. */
export const passAll: Test = () => true

export const compileFilter = (rules: FilterRules | null): Test => {
  if (rules === null || !rules.enabled) return passAll
  const groups = rules.groups
    .filter((g) => g.rules.length > 0)
    .map((g) => {
      const tests = g.rules.map(compileRule)
      return g.logic === "and" ? (s: FilterSubject) => tests.every((t) => t(s)) : (s: FilterSubject) => tests.some((t) => t(s))
    })
  if (groups.length === 0) return passAll
  return (s) => groups.some((g) => g(s))
}

