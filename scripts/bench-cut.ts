#!/usr/bin/env bun
/**
 * What one piece of the request path costs: the in-process A/B (scripts/bench-inprocess.ts) of this
 * checkout, as its files are now, against a copy with the piece cut out, by replacing an exact text
 * of a source file (it must occur there once) with another.
 *
 *   bun scripts/bench-cut.ts FILE OLD NEW [FILE OLD NEW ...] [--pairs 30] [--block 4000] [--stream] >/dev/null
 *
 * e.g. what the request's log line costs:
 *
 *   bun scripts/bench-cut.ts src/http/front-door.ts '    logRequest?.(trace, status, totalMs)' '' >/dev/null
 *
 * Both copies are made in a temporary folder (this checkout's node_modules linked) and removed at
 * the end. "new / old" is the cut copy's CPU over the whole one's: below 1 by what the piece costs.
 * The floor is a cut that changes nothing (a text replaced by itself); the figures of the request
 * path's pieces are in bench/NOTES.md ("Feature by feature").
 */
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { dirname, join, resolve } from "node:path"

/** `text` with its one occurrence of `old` replaced by `replacement`; throws when `old` is not there exactly once. */
export const applyCut = (text: string, old: string, replacement: string, file = "the file"): string => {
  if (old === "") throw new Error(`the text to cut from ${file} is empty`)
  const at = text.indexOf(old)
  if (at === -1) throw new Error(`the text to cut is not in ${file}`)
  if (text.indexOf(old, at + 1) !== -1) throw new Error(`the text to cut is in ${file} more than once: give more of it`)
  return text.slice(0, at) + replacement + text.slice(at + old.length)
}

/** The cuts (FILE OLD NEW triples) and the flags passed on to bench-inprocess. */
export const parseCutArgs = (args: ReadonlyArray<string>) => {
  const passed: Array<string> = []
  const rest: Array<string> = []
  for (let i = 0; i < args.length; i++) {
    const a = args[i] as string
    if (a === "--stream") passed.push(a)
    else if (a === "--pairs" || a === "--block" || a === "--connections" || a === "--log-level") passed.push(a, args[++i] ?? "")
    else rest.push(a)
  }
  if (rest.length === 0 || rest.length % 3 !== 0) throw new Error("give FILE OLD NEW (one or more triples)")
  const cuts: Array<{ readonly file: string; readonly old: string; readonly replacement: string }> = []
  for (let i = 0; i < rest.length; i += 3) cuts.push({ file: rest[i] as string, old: rest[i + 1] as string, replacement: rest[i + 2] as string })
  return { cuts, passed }
}

if (import.meta.main) {
  const root = resolve(import.meta.dir, "..")
  let parsed: ReturnType<typeof parseCutArgs>
  try {
    parsed = parseCutArgs(process.argv.slice(2))
  } catch (e) {
    console.error(`bench-cut: ${(e as Error).message}\nusage: bun scripts/bench-cut.ts FILE OLD NEW [FILE OLD NEW ...] [--pairs 30] [--block 4000] [--stream] >/dev/null`)
    process.exit(2)
  }
  const scratch = mkdtempSync(join(tmpdir(), "bench-cut-"))
  try {
    process.exitCode = runCut(root, scratch, parsed)
  } finally {
    rmSync(scratch, { recursive: true, force: true })
  }
}

/** Copies the checkout twice into `scratch`, cuts one copy and runs the A/B; the exit code. */
function runCut(root: string, scratch: string, parsed: ReturnType<typeof parseCutArgs>): number {
  // The checkout's files as they are now (uncommitted changes included), twice.
  const listed = Bun.spawnSync(["git", "ls-files", "-z"], { cwd: root }).stdout.toString().split("\0").filter((f) => f !== "")
  for (const tree of ["whole", "cut"]) {
    for (const file of listed) {
      const to = join(scratch, tree, file)
      mkdirSync(dirname(to), { recursive: true })
      try {
        copyFileSync(join(root, file), to)
      } catch {
        // Listed but deleted in the working tree: left out.
      }
    }
    symlinkSync(join(root, "node_modules"), join(scratch, tree, "node_modules"))
  }
  for (const { file, old, replacement } of parsed.cuts) {
    const path = join(scratch, "cut", file)
    try {
      writeFileSync(path, applyCut(readFileSync(path, "utf8"), old, replacement, file))
    } catch (e) {
      // A file that is not there, or a text not in it once: one line, no trace.
      console.error(`bench-cut: ${e instanceof Error && "code" in e ? `no file ${file} in this checkout` : (e as Error).message}`)
      return 2
    }
  }
  const run = Bun.spawnSync([process.execPath, join(root, "scripts/bench-inprocess.ts"), join(scratch, "whole"), join(scratch, "cut"), ...parsed.passed], {
    cwd: root,
    stdout: "inherit",
    stderr: "inherit",
  })
  return run.exitCode ?? 1
}
