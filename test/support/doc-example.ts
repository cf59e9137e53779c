/**
 * The worked examples of docs/architecture.md (a plugin, a destination kind, a server tool) are
 * run as real modules: the test that runs one finds its block by the block's `needs` marker, which
 * names that test file, writes it beside the registry it extends (so its relative imports resolve,
 * as a module of that folder's would) and type-checks it with the project's compiler options.
 */
import { readFileSync, rmSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import ts from "typescript"
import { examplesOf } from "../docs/examples.js"

const ROOT = join(import.meta.dir, "..", "..")
const DOC = "docs/architecture.md"

/** The one `ts` block of the doc whose `needs` marker names `testFile` (its path, as `import.meta.path` gives it). */
const exampleFor = (testFile: string): string => {
  const name = relative(ROOT, testFile)
  const blocks = examplesOf(DOC, readFileSync(join(ROOT, DOC), "utf8")).examples.filter((e) => e.language === "ts" && e.needs?.includes(name) === true)
  if (blocks.length !== 1) throw new Error(`expected one ts block of ${DOC} whose needs marker names ${name}, found ${blocks.length}`)
  return (blocks[0] as { code: string }).code
}

/**
 * The example of `testFile` written into `dir` (relative to the repository) as a dot-file named
 * after this process: the project's `tsc` and globs pass over one a cut-short run leaves behind.
 */
export const writeDocExample = (testFile: string, dir: string): { readonly file: string; readonly remove: () => void } => {
  const file = join(ROOT, dir, `.doc-example-${process.pid}.ts`)
  writeFileSync(file, exampleFor(testFile))
  return { file, remove: () => rmSync(file, { force: true }) }
}

/** What the project's compiler options (tsconfig.json) find wrong in `file` and what it imports; [] when it compiles. */
export const typeProblems = (file: string): ReadonlyArray<string> => {
  const config = ts.readConfigFile(join(ROOT, "tsconfig.json"), ts.sys.readFile)
  const { options } = ts.parseJsonConfigFileContent(config.config, ts.sys, ROOT)
  const program = ts.createProgram([file], { ...options, noEmit: true })
  return [...program.getOptionsDiagnostics(), ...program.getSyntacticDiagnostics(), ...program.getSemanticDiagnostics(program.getSourceFile(file))].map((d) =>
    ts.flattenDiagnosticMessageText(d.messageText, "\n"),
  )
}
