/**
 * The code examples of the README and `docs/*.md`, as the docs-examples test runs them.
 *
 * A fenced block in `sh`, `bash` or `shell`, `ts` or `typescript`, or `js`, `javascript` or `mjs`
 * is an example that must run as written against the offline demo (`config/demo.json`), with `GW`
 * and `KEY` set as the README says. One that cannot (it needs a provider account, a config block,
 * a file of yours, the internet, or it starts a server) says so on the line right above its fence,
 * blank lines aside: `<!-- needs: <what it needs, in words> -->`; it is skipped and listed. Fences
 * in other languages (json, yaml, text, ini, console…) are not run.
 */
import { readdirSync, readFileSync } from "node:fs"
import { join } from "node:path"

export type ExampleLanguage = "sh" | "ts" | "js"

const LANGUAGES: Record<string, ExampleLanguage> = {
  sh: "sh",
  bash: "sh",
  shell: "sh",
  ts: "ts",
  typescript: "ts",
  js: "js",
  javascript: "js",
  mjs: "js",
}

export interface Example {
  /** The file, relative to the repository root (`README.md`, `docs/api.md`). */
  readonly file: string
  /** 1-based line of the opening fence. */
  readonly line: number
  readonly language: ExampleLanguage
  readonly code: string
  /** What the example needs beyond the demo (its marker's text); undefined: it runs as written. */
  readonly needs: string | undefined
}

/** A marker or fence that breaks the convention, with where it is. */
export interface ExampleProblem {
  readonly file: string
  readonly line: number
  readonly problem: string
}

const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^\s`]*)/
const MARKER = /^\s*<!--\s*needs\b(.*?)-->\s*$/
/** A marker begins its line (one quoted inside a sentence or a fence is not a marker). */
const ANY_NEEDS = /^\s*<!--\s*needs\b/

/** Every runnable example of one Markdown text, and the markers that break the convention. */
export const examplesOf = (file: string, markdown: string): { examples: Array<Example>; problems: Array<ExampleProblem> } => {
  const lines = markdown.split("\n")
  const examples: Array<Example> = []
  const problems: Array<ExampleProblem> = []
  /** Markers that stand above a fence (the others are reported), and the lines inside fences. */
  const used = new Set<number>()
  const fenced = new Set<number>()
  for (let i = 0; i < lines.length; i++) {
    const open = FENCE.exec(lines[i] as string)
    if (open === null) continue
    const fence = open[1] as string
    const language = LANGUAGES[(open[2] ?? "").toLowerCase()]
    let end = i + 1
    while (end < lines.length && !(lines[end] as string).trim().startsWith(fence)) end++
    for (let inside = i + 1; inside < end; inside++) fenced.add(inside)
    // The marker: the nearest line above the fence that is not blank.
    let above = i - 1
    while (above >= 0 && (lines[above] as string).trim() === "") above--
    const marker = above >= 0 ? MARKER.exec(lines[above] as string) : null
    let needs: string | undefined
    if (marker !== null) {
      used.add(above)
      const text = (marker[1] ?? "").trim()
      needs = text.startsWith(":") ? text.slice(1).trim() : ""
      if (needs === "") problems.push({ file, line: above + 1, problem: "a needs marker must say what the example needs: <!-- needs: … -->" })
    }
    if (language !== undefined) examples.push({ file, line: i + 1, language, code: lines.slice(i + 1, end).join("\n"), needs })
    i = end
  }
  lines.forEach((text, i) => {
    if (ANY_NEEDS.test(text) && !used.has(i) && !fenced.has(i)) {
      problems.push({ file, line: i + 1, problem: "a needs marker must stand on the line right above a fence (blank lines aside), alone on its line" })
    }
  })
  return { examples, problems }
}

/** The README then `docs/*.md` in name order: the order a reader meets them (docs/api.md continues the README's). */
export const documentedFiles = (root: string): ReadonlyArray<string> => [
  "README.md",
  ...readdirSync(join(root, "docs"))
    .filter((name) => name.endsWith(".md"))
    .sort()
    .map((name) => `docs/${name}`),
]

export const examplesOfRepository = (root: string): { examples: Array<Example>; problems: Array<ExampleProblem> } => {
  const examples: Array<Example> = []
  const problems: Array<ExampleProblem> = []
  for (const file of documentedFiles(root)) {
    const found = examplesOf(file, readFileSync(join(root, file), "utf8"))
    examples.push(...found.examples)
    problems.push(...found.problems)
  }
  return { examples, problems }
}
