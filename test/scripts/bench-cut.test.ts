/**
 * scripts/bench-cut.ts: a cut replaces exactly one occurrence of its text, and refuses a text that
 * is missing or ambiguous (a cut that silently changed nothing would read as a piece that costs nothing).
 */
import { describe, expect, test } from "bun:test"
import { applyCut, parseCutArgs } from "../../scripts/bench-cut.js"

describe("bench-cut", () => {
  test("the one occurrence is replaced, the rest kept", () => {
    expect(applyCut("a();\nlog(x);\nb();\n", "log(x);\n", "")).toBe("a();\nb();\n")
    expect(applyCut("if (on) {", "if (on) {", "if (false) {")).toBe("if (false) {")
  })

  test("a missing, repeated or empty text is refused, naming the file", () => {
    expect(() => applyCut("a();", "log(x)", "", "src/x.ts")).toThrow("the text to cut is not in src/x.ts")
    expect(() => applyCut("log(x); log(x);", "log(x)", "", "src/x.ts")).toThrow("more than once")
    expect(() => applyCut("a();", "", "b", "src/x.ts")).toThrow("empty")
  })

  test("triples are the cuts; the bench's flags are passed on", () => {
    const { cuts, passed } = parseCutArgs(["src/a.ts", "old", "new", "--pairs", "60", "src/b.ts", "x", "", "--stream"])
    expect(cuts).toEqual([
      { file: "src/a.ts", old: "old", replacement: "new" },
      { file: "src/b.ts", old: "x", replacement: "" },
    ])
    expect(passed).toEqual(["--pairs", "60", "--stream"])
    expect(() => parseCutArgs(["src/a.ts", "old"])).toThrow("FILE OLD NEW")
  })
})
