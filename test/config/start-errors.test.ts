/**
 * A configuration mistake stops `gateway serve` with one line on stderr naming the setting and the
 * rule, and exit code 1: never a stack trace, never a start on a wrong guess.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Either } from "effect"
import { databaseTarget } from "../../src/config/Config.js"
import { providerKinds } from "../../src/providers/kinds.js"

const root = join(import.meta.dir, "..", "..")
const dir = mkdtempSync(join(tmpdir(), "gw-config-errors-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

/** Room for a test that starts the CLI (a few seconds each on a busy machine). */
const SPAWNS_MS = 60_000

/** `gateway serve` with `env` on top of a start that would work (port 0, a store in memory); it must stop by itself. */
const serve = (env: Record<string, string>) => {
  const proc = Bun.spawnSync([process.execPath, "src/main.ts", "serve"], {
    cwd: root,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", DATABASE_URL: ":memory:", GATEWAY_DATA_DIR: dir, GATEWAY_LOG_LEVEL: "none", ...env },
    timeout: 20_000,
  })
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() }
}

/** Exit 1, nothing served, and stderr is exactly one line: the setting and its rule. */
const refusedWithOneLine = (run: ReturnType<typeof serve>, ...parts: Array<string>) => {
  expect(run.out).not.toContain("listening on")
  expect(run.code).toBe(1)
  const lines = run.err.trim().split("\n")
  expect(lines).toHaveLength(1)
  expect(lines[0]).toStartWith("gateway: configuration error: ")
  for (const part of parts) expect(lines[0]).toContain(part)
  expect(run.err).not.toMatch(/\bat .*\(|Error:/)
}

describe("configuration mistakes at start", () => {
  test("PORT=99999 is refused naming PORT and its range, not a RangeError", () => {
    refusedWithOneLine(serve({ PORT: "99999" }), "PORT", "from 0 to 65535")
  }, SPAWNS_MS)

  test("a variable set but empty is refused, not read as 0 (PORT= listened on a random port, GATEWAY_SHUTDOWN_GRACE_MS= drained nothing)", () => {
    refusedWithOneLine(serve({ PORT: "" }), "environment: PORT: must be an integer from 0 to 65535, not empty")
    refusedWithOneLine(serve({ GATEWAY_SHUTDOWN_GRACE_MS: "" }), "environment: GATEWAY_SHUTDOWN_GRACE_MS: must be an integer")
  }, SPAWNS_MS)

  test("a GATEWAY_CONFIG that is no regular file (a FIFO hung the start, /dev/zero filled memory) is refused before it is read", () => {
    refusedWithOneLine(serve({ GATEWAY_CONFIG: "/dev/zero" }), "/dev/zero: is not a regular file (GATEWAY_CONFIG)")
    refusedWithOneLine(serve({ GATEWAY_CONFIG: dir }), `${dir}: is not a regular file (GATEWAY_CONFIG)`)
  }, SPAWNS_MS)

  test("GATEWAY_UPSTREAM_CLIENT other than http1 or fetch is refused (a typo was the default, silently)", () => {
    refusedWithOneLine(serve({ GATEWAY_UPSTREAM_CLIENT: "bogus" }), "GATEWAY_UPSTREAM_CLIENT", "http1, fetch")
  }, SPAWNS_MS)

  test("a validated secret names its variable (its error had none: 'environment: : …')", () => {
    refusedWithOneLine(serve({ GATEWAY_METRICS_TOKEN: "short" }), "environment: GATEWAY_METRICS_TOKEN: must be at least 16 characters")
    refusedWithOneLine(serve({ REDIS_URL: "http://x" }), "environment: REDIS_URL: must be a redis:// or rediss:// URL")
  }, SPAWNS_MS)

  test("an unknown provider kind lists every allowed kind", () => {
    const file = join(dir, "bad-kind.json")
    writeFileSync(file, JSON.stringify({ providers: [{ id: "x", kind: "openai-chatt", base_url: "http://127.0.0.1:1" }], models: [] }))
    const run = serve({ GATEWAY_CONFIG: file })
    refusedWithOneLine(run, "providers[0].kind", `must be one of ${providerKinds.join(", ")}`)
  }, SPAWNS_MS)

  test("GATEWAY_MAX_BODY_BYTES=-5 is refused by the rule the config file's server.max_body_bytes has", () => {
    refusedWithOneLine(serve({ GATEWAY_MAX_BODY_BYTES: "-5" }), "GATEWAY_MAX_BODY_BYTES", "must be a positive integer", "server.max_body_bytes")
    const file = join(dir, "bad-body.json")
    writeFileSync(file, JSON.stringify({ providers: [], models: [], server: { max_body_bytes: -5 } }))
    refusedWithOneLine(serve({ GATEWAY_CONFIG: file }), "server.max_body_bytes", "must be a positive integer")
  }, SPAWNS_MS)

  test("the other variables of server.* keys follow the file's rules too (idle timeout at most 255 s)", () => {
    refusedWithOneLine(serve({ GATEWAY_IDLE_TIMEOUT_S: "300" }), "GATEWAY_IDLE_TIMEOUT_S", "from 0 to 255")
    refusedWithOneLine(serve({ GATEWAY_MAX_IN_FLIGHT: "0" }), "GATEWAY_MAX_IN_FLIGHT", "must be a positive integer")
  }, SPAWNS_MS)

  test("DATABASE_URL with a scheme other than file:, sqlite:, postgres:// or postgresql:// is refused", () => {
    refusedWithOneLine(serve({ DATABASE_URL: "mysql://user@127.0.0.1/gateway" }), "DATABASE_URL", 'unsupported scheme "mysql:"')
  }, SPAWNS_MS)
})

describe("a HOST this machine cannot bind", () => {
  test("is refused with one line naming HOST, not a stack trace", () => {
    // 192.0.2.1 (TEST-NET-1) is no address of this machine: the bind fails locally, nothing is sent.
    const run = serve({ HOST: "192.0.2.1" })
    expect(run.code).toBe(1)
    expect(run.err.trim().split("\n")).toEqual([expect.stringContaining("gateway: HOST: 192.0.2.1 is not an address of this machine")])
  }, SPAWNS_MS)

  test("a HOST that is no IP address is refused the same way, not with the listen's stack trace", () => {
    const run = serve({ HOST: "not-a-host" })
    expect(run.code).toBe(1)
    expect(run.err.trim().split("\n")).toEqual([expect.stringContaining('gateway: HOST: "not-a-host" is not an IP address')])
  }, SPAWNS_MS)
})

describe("a database that fails at start", () => {
  test("a file that is no SQLite database: one line naming DATABASE_URL and the reason, not a stack trace", () => {
    const file = join(dir, "not-a-database.db")
    writeFileSync(file, "these bytes are no SQLite database, whatever the name says")
    const run = serve({ DATABASE_URL: file })
    expect(run.code).toBe(1)
    expect(run.err.trim().split("\n")).toEqual([`gateway: the database failed at start (DATABASE_URL ${file}): file is not a database`])
    expect(run.out).not.toContain("FiberFailure")
  }, SPAWNS_MS)
})

describe("DATABASE_URL forms", () => {
  test("a path, file:, sqlite: and :memory: are SQLite files; postgres URLs are kept as they are", () => {
    expect(databaseTarget("./data/gateway.db")).toEqual(Either.right("./data/gateway.db"))
    expect(databaseTarget("file:./data/gateway.db")).toEqual(Either.right("./data/gateway.db"))
    expect(databaseTarget("file:///var/lib/gw.db")).toEqual(Either.right("/var/lib/gw.db"))
    expect(databaseTarget("sqlite:///var/lib/gw.db")).toEqual(Either.right("/var/lib/gw.db"))
    expect(databaseTarget("sqlite::memory:")).toEqual(Either.right(":memory:"))
    expect(databaseTarget(":memory:")).toEqual(Either.right(":memory:"))
    expect(databaseTarget("postgres://u@h:5432/db")).toEqual(Either.right("postgres://u@h:5432/db"))
    expect(databaseTarget("postgresql://u@h/db")).toEqual(Either.right("postgresql://u@h/db"))
    expect(Either.isLeft(databaseTarget("redis://127.0.0.1"))).toBe(true)
  }, SPAWNS_MS)

  test("a file: URL opens that SQLite file", () => {
    const file = join(dir, "via-file-url.db")
    const proc = Bun.spawnSync([process.execPath, "src/main.ts", "migrate"], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: `file:${file}`, GATEWAY_DATA_DIR: dir, GATEWAY_LOG_LEVEL: "none" },
    })
    expect(proc.exitCode).toBe(0)
    expect(Bun.file(file).size).toBeGreaterThan(0)
  }, SPAWNS_MS)
})
