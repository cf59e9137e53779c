#!/usr/bin/env bun
/**
 * The source's floors, held against its imports. Every file under src/ stands on one floor (the
 * list below, lowest first); an import may stay on its floor or go down, never up. The checker
 * reads every import of every file under src/ (type imports, re-exports and `import()` included)
 * and prints:
 *   - import circles: strongly connected components of more than one file;
 *   - imports that run back up a floor, file -> file;
 *   - functions over 150 lines without a `// long: <reason>` comment on or just above their first line.
 * It exits 1 when there is a circle, more than 3 upward imports, or an unexplained long function.
 *
 * Run: node_modules/.bin/bun scripts/layers.ts [--root DIR]   (DIR holds src/; the checkout by default)
 */
import { readdirSync, readFileSync, statSync } from "node:fs"
import { dirname, join, normalize, sep } from "node:path"
import ts from "typescript"

export interface Floor {
  readonly name: string
  /** Paths from the root: a folder ends with "/", else it is one file. The longest match places a file. */
  readonly paths: ReadonlyArray<string>
  readonly why: string
}

/** The floors of src/, lowest first: a file may import its own floor and those below it. */
export const FLOORS: ReadonlyArray<Floor> = [
  {
    name: "domain",
    paths: ["src/domain/", "src/clock.ts", "src/deadlines.ts"],
    why: "wire Schemas and errors, no I/O: the words every other floor speaks; and the clock seam and the deadline list every floor reads time through",
  },
  {
    name: "wire",
    paths: ["src/providers/", "src/outbound/"],
    why: "the upstream providers' wire formats and the guarded outbound fetch: they need only the domain, and the config lists its kinds from them",
  },
  { name: "config", paths: ["src/config/"], why: "the environment and the config file, decoded once at start into domain shapes" },
  {
    name: "lib",
    paths: ["src/lib/"],
    why: "libraries that know no request: PDF text in a worker, JSON healing, web search engines, page fetch and extraction (the plugins and the server tools both use them), the JSON-lines log writer",
  },
  { name: "store", paths: ["src/store/"], why: "SQLite and Postgres, migrations and the ledger's writers: tables, no product rule" },
  {
    name: "services",
    paths: ["src/services/", "src/routing/"],
    why: "the product's nouns over the store (keys, spend, catalog, generations) and the router that chooses among endpoints",
  },
  {
    name: "features",
    paths: ["src/formats/", "src/tools/", "src/broadcast/"],
    why: "what the pipeline and the front door assemble: client formats, server tools, broadcast to destinations",
  },
  { name: "pipeline", paths: ["src/pipeline/"], why: "the request's stages and plugins, from the parsed body to the recorded generation" },
  {
    name: "http",
    paths: ["src/http/", "src/console/"],
    why: "the front door: routes, the control plane's handlers, metrics and logs, the web console",
  },
  {
    name: "app",
    paths: ["src/app.ts", "src/http/server.ts", "src/cli.ts", "src/main.ts", "src/supervisor.ts"],
    why: "composition and entry points (the service graph, the server that runs it, the CLI): imported by nothing below",
  },
  {
    name: "testing",
    paths: ["src/testing/"],
    why: "the test kit (the ./testing entry): composes the whole gateway in a test, so it stands above what it composes",
  },
]

export const LONG_FUNCTION_LINES = 150
export const MAX_UPWARD_IMPORTS = 3
const SOURCE = /\.(ts|tsx|mts|cts)$/

export interface Import {
  readonly from: string
  readonly to: string
  readonly line: number
  readonly typeOnly: boolean
}

export interface LongFunction {
  readonly file: string
  readonly line: number
  readonly name: string
  readonly lines: number
  readonly reason: string | undefined
}

/** Every source file under `dir`, as paths relative to `root` with "/" separators, sorted. */
export const sourceFiles = (root: string, dir = "src"): Array<string> => {
  const out: Array<string> = []
  const walk = (rel: string) => {
    for (const entry of readdirSync(join(root, rel)).sort()) {
      const path = `${rel}/${entry}`
      if (statSync(join(root, path)).isDirectory()) walk(path)
      else if (SOURCE.test(entry)) out.push(path)
    }
  }
  walk(dir)
  return out
}

const parse = (file: string, text: string): ts.SourceFile =>
  ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true, file.endsWith("x") ? ts.ScriptKind.TSX : ts.ScriptKind.TS)

/** The module specifiers a file names: static imports and re-exports (type-only too), `import()`, `require()` and `import("x")` types. */
export const importsOf = (file: string, text: string): Array<{ specifier: string; line: number; typeOnly: boolean }> => {
  const source = parse(file, text)
  const out: Array<{ specifier: string; line: number; typeOnly: boolean }> = []
  const add = (literal: ts.Node, typeOnly: boolean) => {
    if (ts.isStringLiteralLike(literal)) {
      out.push({ specifier: literal.text, line: source.getLineAndCharacterOfPosition(literal.getStart(source)).line + 1, typeOnly })
    }
  }
  const visit = (node: ts.Node) => {
    if (ts.isImportDeclaration(node)) {
      const clause = node.importClause
      const typeOnly =
        clause !== undefined &&
        (clause.isTypeOnly ||
          (clause.name === undefined &&
            clause.namedBindings !== undefined &&
            ts.isNamedImports(clause.namedBindings) &&
            clause.namedBindings.elements.length > 0 &&
            clause.namedBindings.elements.every((e) => e.isTypeOnly)))
      add(node.moduleSpecifier, typeOnly)
    } else if (ts.isExportDeclaration(node) && node.moduleSpecifier !== undefined) {
      add(node.moduleSpecifier, node.isTypeOnly)
    } else if (ts.isImportEqualsDeclaration(node) && ts.isExternalModuleReference(node.moduleReference)) {
      add(node.moduleReference.expression, node.isTypeOnly)
    } else if (ts.isImportTypeNode(node) && ts.isLiteralTypeNode(node.argument)) {
      add(node.argument.literal, true)
    } else if (ts.isCallExpression(node) && node.arguments.length > 0) {
      const callee = node.expression
      if (callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === "require")) add(node.arguments[0], false)
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return out
}

/** The file of `files` a relative specifier names from `from` (`./x.js` is `./x.ts`, a folder is its index), or undefined. */
export const resolveImport = (from: string, specifier: string, files: ReadonlySet<string>): string | undefined => {
  if (!specifier.startsWith(".")) return undefined
  const base = normalize(join(dirname(from), specifier)).split(sep).join("/")
  const stem = base.replace(/\.(m|c)?jsx?$/, "")
  for (const candidate of [base, `${stem}.ts`, `${stem}.tsx`, `${stem}.d.ts`, `${base}/index.ts`, `${base}/index.tsx`]) {
    if (files.has(candidate)) return candidate
  }
  return undefined
}

/** Every import between two files of the set (an import of a package, or of a file outside it, is left out). */
export const importGraph = (root: string, files: ReadonlyArray<string>): Array<Import> => {
  const known = new Set(files)
  const out: Array<Import> = []
  for (const from of files) {
    for (const { specifier, line, typeOnly } of importsOf(from, readFileSync(join(root, from), "utf8"))) {
      const to = resolveImport(from, specifier, known)
      if (to !== undefined && to !== from) out.push({ from, to, line, typeOnly })
    }
  }
  return out
}

/** Strongly connected components of more than one file (Tarjan), each sorted, largest first. */
export const circles = (files: ReadonlyArray<string>, imports: ReadonlyArray<Import>): Array<Array<string>> => {
  const next = new Map<string, Array<string>>(files.map((f) => [f, []]))
  for (const { from, to } of imports) next.get(from)?.push(to)
  const index = new Map<string, number>()
  const low = new Map<string, number>()
  const stack: Array<string> = []
  const onStack = new Set<string>()
  const out: Array<Array<string>> = []
  let counter = 0
  // Iterative, so a long chain of imports cannot overflow the call stack.
  for (const start of files) {
    if (index.has(start)) continue
    const work: Array<{ node: string; edge: number }> = [{ node: start, edge: 0 }]
    index.set(start, counter)
    low.set(start, counter++)
    stack.push(start)
    onStack.add(start)
    while (work.length > 0) {
      const top = work[work.length - 1]
      const edges = next.get(top.node) ?? []
      if (top.edge < edges.length) {
        const to = edges[top.edge++]
        if (!index.has(to)) {
          index.set(to, counter)
          low.set(to, counter++)
          stack.push(to)
          onStack.add(to)
          work.push({ node: to, edge: 0 })
        } else if (onStack.has(to)) {
          low.set(top.node, Math.min(low.get(top.node)!, index.get(to)!))
        }
        continue
      }
      work.pop()
      if (work.length > 0) {
        const parent = work[work.length - 1].node
        low.set(parent, Math.min(low.get(parent)!, low.get(top.node)!))
      }
      if (low.get(top.node) === index.get(top.node)) {
        const component: Array<string> = []
        let member: string
        do {
          member = stack.pop()!
          onStack.delete(member)
          component.push(member)
        } while (member !== top.node)
        if (component.length > 1) out.push(component.sort())
      }
    }
  }
  return out.sort((a, b) => b.length - a.length || a[0].localeCompare(b[0]))
}

/** The index in `floors` of the floor a file stands on (the longest path that holds it), or -1 when none does. */
export const floorOf = (file: string, floors: ReadonlyArray<Floor>): number => {
  let best = -1
  let bestLength = -1
  floors.forEach((floor, i) => {
    for (const path of floor.paths) {
      const holds = path.endsWith("/") ? file.startsWith(path) : file === path
      if (holds && path.length > bestLength) {
        best = i
        bestLength = path.length
      }
    }
  })
  return best
}

/** The imports from a lower floor to a higher one. */
export const upwardImports = (imports: ReadonlyArray<Import>, floors: ReadonlyArray<Floor>): Array<Import> =>
  imports.filter(({ from, to }) => floorOf(from, floors) < floorOf(to, floors))

/** A function's name as a reader finds it: its own, its variable's or property's, else `(anonymous)`. */
const nameOf = (node: ts.Node, source: ts.SourceFile): string => {
  const own = (node as { name?: ts.Node }).name
  if (own !== undefined) return own.getText(source)
  if (ts.isConstructorDeclaration(node)) return "constructor"
  let at: ts.Node = node
  // Up through the calls that wrap it (`Effect.gen(function* () {…})`) to what names it.
  while (at.parent !== undefined && (ts.isCallExpression(at.parent) || ts.isParenthesizedExpression(at.parent) || ts.isAsExpression(at.parent))) {
    at = at.parent
  }
  const parent = at.parent
  if (parent !== undefined && (ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent))) {
    return parent.name.getText(source)
  }
  return "(anonymous)"
}

const LONG_REASON = /\/\/\s*long:\s*(\S.*)$/

/** The reason of a `// long: <reason>` comment on `line` (0-based) or in the comment lines just above it. */
const longReason = (lines: ReadonlyArray<string>, line: number): string | undefined => {
  const on = LONG_REASON.exec(lines[line] ?? "")
  if (on !== null) return on[1].trim()
  for (let i = line - 1; i >= 0; i--) {
    const text = lines[i].trim()
    if (!text.startsWith("//") && !text.startsWith("*") && !text.startsWith("/*")) break
    const above = LONG_REASON.exec(text)
    if (above !== null) return above[1].trim()
  }
  return undefined
}

/** Functions (declarations, expressions, arrows, methods, accessors) of more than `limit` lines, with their `// long:` reason if any. */
export const longFunctions = (file: string, text: string, limit = LONG_FUNCTION_LINES): Array<LongFunction> => {
  const source = parse(file, text)
  const lines = text.split("\n")
  const out: Array<LongFunction> = []
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && (node as { body?: ts.Node }).body !== undefined) {
      const first = source.getLineAndCharacterOfPosition(node.getStart(source)).line
      const last = source.getLineAndCharacterOfPosition(node.getEnd()).line
      const length = last - first + 1
      if (length > limit) out.push({ file, line: first + 1, name: nameOf(node, source), lines: length, reason: longReason(lines, first) })
    }
    ts.forEachChild(node, visit)
  }
  visit(source)
  return out
}

export interface Report {
  readonly files: number
  readonly imports: ReadonlyArray<Import>
  readonly circles: ReadonlyArray<ReadonlyArray<string>>
  readonly upward: ReadonlyArray<Import>
  readonly unplaced: ReadonlyArray<string>
  readonly long: ReadonlyArray<LongFunction>
}

/** The whole analysis of the tree under `root`/src. */
export const analyse = (root: string, floors: ReadonlyArray<Floor> = FLOORS): Report => {
  const files = sourceFiles(root)
  const imports = importGraph(root, files)
  return {
    files: files.length,
    imports,
    circles: circles(files, imports),
    upward: upwardImports(imports, floors),
    unplaced: files.filter((f) => floorOf(f, floors) === -1),
    long: files.flatMap((f) => longFunctions(f, readFileSync(join(root, f), "utf8"))),
  }
}

/** Whether the tree holds: no circle, at most 3 upward imports, every file on a floor, every long function explained. */
/** `structureOnly`: the floors alone (circles, upward imports, unplaced files), not the long functions. */
export const holds = (report: Report, structureOnly = false): boolean =>
  report.circles.length === 0 &&
  report.upward.length <= MAX_UPWARD_IMPORTS &&
  report.unplaced.length === 0 &&
  (structureOnly || report.long.every((f) => f.reason !== undefined))

const print = (report: Report, floors: ReadonlyArray<Floor>, structureOnly = false) => {
  const say = (line = ""): void => {
    process.stdout.write(`${line}\n`)
  }
  say(`floors, lowest first:`)
  for (const [i, floor] of floors.entries()) say(`  ${i + 1}. ${floor.name} (${floor.paths.join(", ")}): ${floor.why}`)
  say()
  say(`circles: ${report.circles.length}`)
  for (const circle of report.circles) {
    const members = new Set(circle)
    say(`  ${circle.length} files: ${circle.join(", ")}`)
    for (const i of report.imports) {
      if (members.has(i.from) && members.has(i.to)) say(`    ${i.from}:${i.line} -> ${i.to}${i.typeOnly ? " (type)" : ""}`)
    }
  }
  say()
  say(`imports that run back up a floor: ${report.upward.length} (at most ${MAX_UPWARD_IMPORTS})`)
  for (const i of report.upward) {
    const nameOf = (file: string) => floors[floorOf(file, floors)]?.name ?? "no floor"
    say(`  ${i.from}:${i.line} -> ${i.to}${i.typeOnly ? " (type)" : ""}  [${nameOf(i.from)} -> ${nameOf(i.to)}]`)
  }
  if (report.unplaced.length > 0) {
    say()
    say(`files on no floor: ${report.unplaced.length}`)
    for (const f of report.unplaced) say(`  ${f}`)
  }
  say()
  const unexplained = report.long.filter((f) => f.reason === undefined)
  say(`functions over ${LONG_FUNCTION_LINES} lines: ${report.long.length}, ${unexplained.length} without a \`// long: <reason>\` comment`)
  for (const f of report.long) say(`  ${f.file}:${f.line} ${f.name} ${f.lines} lines${f.reason === undefined ? "" : `  (long: ${f.reason})`}`)
  say()
  say(
    `${report.files} files, ${report.imports.length} imports: ${report.circles.length} circles, ${report.upward.length} upward imports, ` +
      `${unexplained.length} unexplained long functions: ${holds(report, structureOnly) ? "holds" : "FAILS"}${structureOnly ? " (--structure: the long functions are listed, not held)" : ""}`,
  )
}

if (import.meta.main) {
  const at = process.argv.indexOf("--root")
  const root = at === -1 ? join(import.meta.dir, "..") : process.argv[at + 1]
  // `--structure`: the floors alone, for a tree whose long functions are being split.
  const structureOnly = process.argv.includes("--structure")
  const report = analyse(root)
  print(report, FLOORS, structureOnly)
  process.exit(holds(report, structureOnly) ? 0 : 1)
}
