/**
 * An operator's pattern searched in a caller's text (the guardrails, docs/routing.md): in time
 * linear in the text, whatever the text. JavaScriptCore's engine backtracks, and a search is tried
 * from every start position: `ignore.*instructions` took 30 s over 700 KB of "ignore ignore …",
 * the request thread stopped meanwhile. So a pattern whose matches read a short, bounded stretch
 * from each start (`regexReadsBounded`) runs there, where it is fastest (~0.2 ms a MB of plain
 * text; ~50 ms a MB at worst with spans of 64); any other runs on RE2's engine (`re2js`), which
 * takes ~50 ms a MB on any text and never backtracks.
 */
import { RE2JS } from "re2js"
import { regexReadsBounded } from "./safe-regex.js"

/** Longest pattern the backtracking engine is trusted with (longer ones run on RE2). */
const BOUNDED_PATTERN_MAX_LENGTH = 1_024
/**
 * Longest stretch a match may read from its start for the backtracking engine: at 64 its worst
 * text (`a{1,64}b` over 1 MB of `a`) took 49 ms, about what RE2 takes on any megabyte.
 */
const BOUNDED_MAX_SPAN = 64

export interface PatternSearch {
  readonly test: (text: string) => boolean
  /** Which engine searches: the backtracking one of the runtime, or RE2's linear one. */
  readonly engine: "backtracking" | "re2"
}

/** The search for a case-insensitive pattern, on the engine its shape allows; throws what RE2 refuses. */
export const patternSearch = (source: string): PatternSearch => {
  if (regexReadsBounded(source, BOUNDED_PATTERN_MAX_LENGTH, BOUNDED_MAX_SPAN)) {
    const regex = new RegExp(source, "i")
    return { test: (text) => regex.test(text), engine: "backtracking" }
  }
  const re2 = RE2JS.compile(source, RE2JS.CASE_INSENSITIVE)
  return { test: (text) => re2.matcher(text).find(), engine: "re2" }
}

/** Why a pattern cannot be searched (not a regular expression; RE2 cannot run a pattern whose reading is unbounded), or undefined. */
export const patternSearchProblem = (source: string): string | undefined => {
  try {
    new RegExp(source, "i")
  } catch (e) {
    return `not a valid regular expression (${(e as Error).message})`
  }
  try {
    patternSearch(source)
    return undefined
  } catch (e) {
    return (
      `its matches can read text without bound, so it runs on RE2's linear-time engine, which refuses it (${(e as Error).message}): ` +
      "drop lookarounds and backreferences, or bound every quantifier but the last (e.g. .{0,64} for .*)"
    )
  }
}
