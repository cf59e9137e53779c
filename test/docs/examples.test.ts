/**
 * Every shell, TypeScript and JavaScript example of the README and `docs/*.md` runs as written
 * against the offline demo (`config/demo.json`, a fresh SQLite file), with `GW` and `KEY` set as
 * the README says; an example that cannot carries `<!-- needs: … -->` right above its fence and is
 * listed instead (test/docs/examples.ts has the convention).
 *
 * Shell examples run with `bash -euo pipefail`, in order (README first, then docs/ by name), each
 * seeing the functions the earlier ones defined (docs/api.md uses the README's `field`), with a
 * `curl` that fails on an HTTP error status (`--fail-with-body`): an example answered 404 fails
 * here, as it fails its reader. JavaScript runs with `node` (the README says `node example.mjs`),
 * TypeScript with `bun`, both importing the pinned SDKs from this clone. Each run is bounded.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { randomBytes } from "node:crypto"
import { chmodSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { untilListening } from "../support/spawned.js"
import { type Example, examplesOf, examplesOfRepository } from "./examples.js"

const root = join(import.meta.dir, "..", "..")
const { examples, problems } = examplesOfRepository(root)
const runnable = examples.filter((e) => e.needs === undefined)
const marked = examples.filter((e) => e.needs !== undefined)

/** One example's run at most, kill included: the longest today (demo/slow's stream) takes ~3 s. */
const EXAMPLE_TIMEOUT_S = 60
/** What a failure report quotes of an output at most (its end, where the error is). */
const QUOTE_CHARS = 4000

const where = (e: Example) => `${e.file}:${e.line} (${e.language})`

const tail = (text: string) => (text.length > QUOTE_CHARS ? `…${text.slice(-QUOTE_CHARS)}` : text)

let dir: string
let gateway: Bun.Subprocess | undefined
let env: Record<string, string>

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gw-docs-examples-"))
  // The examples import the pinned SDKs (`openai`, `@openrouter/sdk`, `@anthropic-ai/sdk`) as a reader in this clone does.
  symlinkSync(join(root, "node_modules"), join(dir, "node_modules"), "dir")
  // `curl` as the examples call it, failing on an HTTP error status (the body is still shown).
  const bin = join(dir, "bin")
  const realCurl = Bun.which("curl")
  if (realCurl === null) throw new Error("the docs examples need curl on PATH")
  Bun.spawnSync(["mkdir", "-p", bin])
  writeFileSync(join(bin, "curl"), `#!/usr/bin/env bash\nexec ${JSON.stringify(realCurl)} --fail-with-body -S "$@"\n`)
  chmodSync(join(bin, "curl"), 0o755)
  writeFileSync(join(dir, "functions.sh"), "")
  const key = `sk-gw-v1-${randomBytes(32).toString("hex")}`
  const data = join(dir, "data")
  gateway = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
    cwd: root,
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      GATEWAY_CONFIG: join(root, "config", "demo.json"),
      GATEWAY_DATA_DIR: data,
      DATABASE_URL: join(data, "gateway.db"),
      GATEWAY_MANAGEMENT_KEY: key,
      GATEWAY_LOG_LEVEL: "none",
    },
    stdout: "pipe",
    stderr: "inherit",
  })
  const url = await untilListening(gateway, "the demo gateway")
  env = { ...(process.env as Record<string, string>), PATH: `${bin}:${process.env["PATH"] ?? ""}`, GW: `${url}/v1`, KEY: key }
}, 60_000)

afterAll(async () => {
  if (gateway !== undefined) {
    gateway.kill("SIGTERM")
    await gateway.exited
  }
  if (dir !== undefined) rmSync(dir, { recursive: true, force: true })
})

let scripts = 0

/** coreutils `timeout` signals the example's whole process group (its curls too); without it, the spawn's own bound ends the shell. */
const coreutilsTimeout = Bun.which("timeout")

/** The command that runs an example, bounded. */
const commandOf = (e: Example): Array<string> => {
  const name = `example-${++scripts}`
  const bounded = coreutilsTimeout === null ? [] : [coreutilsTimeout, "-k", "5", String(EXAMPLE_TIMEOUT_S)]
  if (e.language === "sh") {
    const file = join(dir, `${name}.sh`)
    const functions = join(dir, "functions.sh")
    // The functions an example defines are kept for the later ones; its variables are its own.
    // The example's first line is the script's third: a failing command is reported at its line of the Markdown file.
    const trap = `trap 'echo "failed: the command ending at ${e.file}:$((LINENO + ${e.line - 2}))" >&2' ERR`
    writeFileSync(file, `set -euo pipefail\n${trap}; source ${JSON.stringify(functions)}\n${e.code}\ndeclare -f > ${JSON.stringify(functions)}\n`)
    return [...bounded, "bash", file]
  }
  const file = join(dir, `${name}.${e.language === "ts" ? "ts" : "mjs"}`)
  writeFileSync(file, e.code)
  return e.language === "ts" ? [...bounded, process.execPath, file] : [...bounded, Bun.which("node") ?? process.execPath, file]
}

const run = async (e: Example): Promise<void> => {
  const proc = Bun.spawn(commandOf(e), {
    cwd: dir,
    env,
    stdout: "pipe",
    stderr: "pipe",
    stdin: "ignore",
    timeout: (EXAMPLE_TIMEOUT_S + 5) * 1000,
    killSignal: "SIGKILL",
  })
  const [stdout, stderr, code] = await Promise.all([new Response(proc.stdout).text(), new Response(proc.stderr).text(), proc.exited])
  if (code === 0) return
  const why = code === 124 || code === 137 || proc.signalCode === "SIGKILL" ? `did not finish within ${EXAMPLE_TIMEOUT_S} s` : `exited ${code}`
  throw new Error(
    `${where(e)} ${why} against the demo gateway\n--- example ---\n${e.code}\n--- stdout ---\n${tail(stdout)}\n--- stderr ---\n${tail(stderr)}`,
  )
}

describe("the needs marker convention", () => {
  test("a fence is an example in sh, bash, shell, ts, typescript, js, javascript or mjs; other languages are not run", () => {
    const md = ["```sh", "echo a", "```", "```json", "{}", "```", "```ts", "1", "```", "```console", "$ x", "```", "```js", "2", "```"].join("\n")
    expect(examplesOf("x.md", md).examples.map((e) => [e.line, e.language, e.code])).toEqual([
      [1, "sh", "echo a"],
      [7, "ts", "1"],
      [13, "js", "2"],
    ])
  })

  test("a marker right above the fence, blank lines aside, gives what the example needs", () => {
    const md = ["<!-- needs: a search engine config -->", "", "```sh", "curl x", "```", "```sh", "curl y", "```"].join("\n")
    const { examples: found, problems: none } = examplesOf("x.md", md)
    expect(found.map((e) => e.needs)).toEqual(["a search engine config", undefined])
    expect(none).toEqual([])
  })

  test("a marker with nothing after needs:, or not above a fence, is a problem naming its line", () => {
    const md = [
      ...["<!-- needs: -->", "```sh", "x", "```", "<!-- needs -->", "```sh", "y", "```", "", "<!-- needs: orphan -->", "text", "```sh", "z", "```"],
      // Quoted in a sentence or shown in a fence, it is not a marker.
      ...["Write `<!-- needs: … -->` above it.", "```md", "<!-- needs: shown -->", "```"],
    ].join("\n")
    expect(examplesOf("x.md", md).problems).toEqual([
      { file: "x.md", line: 1, problem: "a needs marker must say what the example needs: <!-- needs: … -->" },
      { file: "x.md", line: 5, problem: "a needs marker must say what the example needs: <!-- needs: … -->" },
      { file: "x.md", line: 10, problem: "a needs marker must stand on the line right above a fence (blank lines aside), alone on its line" },
    ])
  })

  test("every marker of the README and docs/ says what its example needs, and stands above one", () => {
    expect(problems).toEqual([])
    expect(runnable.length).toBeGreaterThan(20)
    // The examples left out, and why: read them when the demo grows.
    console.log(`docs examples not run (${marked.length}):\n${marked.map((e) => `  ${where(e)}: needs ${e.needs}`).join("\n")}`)
  })

  test("a runnable example reaches the gateway through $GW, not a fixed address", () => {
    const fixed = runnable.filter((e) => /\b(localhost|127\.0\.0\.1):\d+/.test(e.code)).map(where)
    expect(fixed).toEqual([])
  })
})

describe("the README and docs/ examples run as written against the demo", () => {
  for (const example of runnable) {
    test(`${where(example)} runs against the demo as written`, () => run(example), (EXAMPLE_TIMEOUT_S + 10) * 1000)
  }
})
