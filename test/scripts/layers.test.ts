/** The layer checker (scripts/layers.ts) on small trees written to a temp folder: what it must find, and what it must not. */
import { afterAll, describe, expect, test } from "bun:test"
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join } from "node:path"
import { analyse, circles, type Floor, holds, importGraph, longFunctions, sourceFiles, upwardImports } from "../../scripts/layers.js"

const roots: Array<string> = []
afterAll(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true })
})

/** A tree of files (path from the root: text), written to a fresh temp folder; returns its root. */
const tree = (files: Record<string, string>): string => {
  const root = mkdtempSync(join(tmpdir(), "layers-"))
  roots.push(root)
  for (const [path, text] of Object.entries(files)) {
    mkdirSync(dirname(join(root, path)), { recursive: true })
    writeFileSync(join(root, path), text)
  }
  return root
}

const FLOORS: ReadonlyArray<Floor> = [
  { name: "low", paths: ["src/low/"], why: "the ground" },
  { name: "high", paths: ["src/high/", "src/main.ts"], why: "above it" },
]

/** A function of `lines` lines in all (its first and last line included). */
const fn = (name: string, lines: number): string =>
  [`export function ${name}() {`, ...Array.from({ length: lines - 2 }, (_, i) => `  const v${i} = ${i}`), "}"].join("\n")

describe("import circles", () => {
  test("two files that import each other (one through a type import) are a circle; a file that only imports them is not in it", () => {
    const root = tree({
      "src/low/a.ts": 'import type { B } from "./b.js"\nexport type A = { b: B }\n',
      "src/low/b.ts": 'import { a } from "./a.js"\nexport type B = typeof a\n',
      "src/high/c.ts": 'import type { A } from "../low/a.js"\nexport type C = A\n',
    })
    const files = sourceFiles(root)
    expect(circles(files, importGraph(root, files))).toEqual([["src/low/a.ts", "src/low/b.ts"]])
  })

  test("a loop through a re-export, a folder's index and a dynamic import is one circle of three files", () => {
    const root = tree({
      "src/low/a.ts": 'export { b } from "./inner"\n',
      "src/low/inner/index.ts": 'export const b = () => import("../c.js")\n',
      "src/low/c.ts": 'export * from "./a"\n',
      "src/low/d.ts": 'import "./c.js"\n',
    })
    const files = sourceFiles(root)
    expect(circles(files, importGraph(root, files))).toEqual([["src/low/a.ts", "src/low/c.ts", "src/low/inner/index.ts"]])
  })

  test("a chain without a loop, and imports of packages, make no circle", () => {
    const root = tree({
      "src/low/a.ts": 'import { Effect } from "effect"\nimport { b } from "./b.js"\nexport const a = [b, Effect]\n',
      "src/low/b.ts": 'export const b = 1\n',
    })
    const files = sourceFiles(root)
    const imports = importGraph(root, files)
    expect(imports.map((i) => [i.from, i.to])).toEqual([["src/low/a.ts", "src/low/b.ts"]])
    expect(circles(files, imports)).toEqual([])
  })
})

describe("imports that run back up a floor", () => {
  const root = tree({
    "src/low/x.ts": 'import type { Y } from "../high/y.js"\nexport type X = Y\n',
    "src/low/z.ts": 'import type { X } from "./x.js"\nexport type Z = X\n',
    "src/high/y.ts": 'import { w } from "../low/w.js"\nexport type Y = typeof w\n',
    "src/low/w.ts": "export const w = 1\n",
    "src/main.ts": 'import type { Y } from "./high/y.js"\nexport type M = Y\n',
  })

  test("a low file importing a high one is reported, file -> file with its line; down and sideways are not", () => {
    const files = sourceFiles(root)
    const upward = upwardImports(importGraph(root, files), FLOORS)
    expect(upward).toEqual([{ from: "src/low/x.ts", to: "src/high/y.ts", line: 1, typeOnly: true }])
  })

  test("one upward import holds; four do not", () => {
    expect(holds(analyse(root, FLOORS))).toBe(true)
    const four = tree(
      Object.fromEntries([
        ["src/high/y.ts", "export const y = 1\n"],
        ...[1, 2, 3, 4].map((i) => [`src/low/x${i}.ts`, `import { y } from "../high/y.js"\nexport const x${i} = y\n`]),
      ]),
    )
    const report = analyse(four, FLOORS)
    expect(report.upward).toHaveLength(4)
    expect(holds(report)).toBe(false)
  })

  test("a file on no floor fails the check", () => {
    const report = analyse(tree({ "src/low/a.ts": "export const a = 1\n", "src/other/b.ts": "export const b = 1\n" }), FLOORS)
    expect(report.unplaced).toEqual(["src/other/b.ts"])
    expect(holds(report)).toBe(false)
  })
})

describe("functions over 150 lines", () => {
  test("151 lines without a comment are reported unexplained; 150 lines are not reported", () => {
    const text = `${fn("short", 150)}\n${fn("long", 151)}\n`
    expect(longFunctions("src/low/a.ts", text)).toEqual([{ file: "src/low/a.ts", line: 151, name: "long", lines: 151, reason: undefined }])
  })

  test("an unexplained long function fails the whole check, not the structure-only one (--structure)", () => {
    const report = analyse(tree({ "src/low/a.ts": `${fn("long", 151)}\n` }), FLOORS)
    expect(report.long.map((f) => f.reason)).toEqual([undefined])
    expect(holds(report)).toBe(false)
    expect(holds(report, true)).toBe(true)
  })

  test("a `// long: <reason>` comment on the first line or just above it explains the function", () => {
    const above = `// long: one switch over every event kind\n${fn("above", 160)}\n`
    expect(longFunctions("src/low/a.ts", above)).toEqual([
      { file: "src/low/a.ts", line: 2, name: "above", lines: 160, reason: "one switch over every event kind" },
    ])
    const on = fn("on", 160).replace("() {", "() { // long: the hot path, measured")
    expect(longFunctions("src/low/a.ts", on).map((f) => f.reason)).toEqual(["the hot path, measured"])
  })

  test("a comment further up, behind code, does not explain it", () => {
    const text = `// long: about something else\nexport const x = 1\n${fn("far", 160)}\n`
    expect(longFunctions("src/low/a.ts", text).map((f) => [f.name, f.reason])).toEqual([["far", undefined]])
  })

  test("arrows and generator functions inside calls are measured and named after what holds them", () => {
    const body = Array.from({ length: 155 }, (_, i) => `    const v${i} = ${i}`).join("\n")
    const text = `export const make = (a: number) => {\n  const inner = Effect.gen(function* () {\n${body}\n  })\n  return inner\n}\n`
    expect(longFunctions("src/low/a.ts", text).map((f) => [f.name, f.line, f.lines])).toEqual([
      ["make", 1, 160],
      ["inner", 2, 157],
    ])
  })

  test("an unexplained long function fails the whole check; the same one explained passes", () => {
    expect(holds(analyse(tree({ "src/low/a.ts": fn("long", 200) }), FLOORS))).toBe(false)
    expect(holds(analyse(tree({ "src/low/a.ts": `// long: a table\n${fn("long", 200)}` }), FLOORS))).toBe(true)
  })
})

describe("the command", () => {
  const run = (root: string) => Bun.spawnSync([process.execPath, join(import.meta.dir, "../../scripts/layers.ts"), "--root", root])

  test("exits 1 on a circle and names its files; exits 0 on a tree that holds", () => {
    const bad = run(
      tree({
        "src/domain/a.ts": 'import type { B } from "./b.js"\nexport type A = B\n',
        "src/domain/b.ts": 'import type { A } from "./a.js"\nexport type B = A | 1\n',
      }),
    )
    expect(bad.exitCode).toBe(1)
    expect(bad.stdout.toString()).toContain("2 files: src/domain/a.ts, src/domain/b.ts")
    const good = run(tree({ "src/domain/a.ts": "export const a = 1\n", "src/http/b.ts": 'import { a } from "../domain/a.js"\nexport const b = a\n' }))
    expect([good.exitCode, good.stdout.toString().trim().split("\n").at(-1)]).toEqual([
      0,
      "2 files, 1 imports: 0 circles, 0 upward imports, 0 unexplained long functions: holds",
    ])
  })
})
