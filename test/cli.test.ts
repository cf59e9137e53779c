import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { engine, freshDatabase, type TestDatabase } from "./support/db.js"

const root = join(import.meta.dir, "..")
let db: TestDatabase
let dir: string

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gw-cli-"))
  db = engine === "postgres" ? await freshDatabase() : { url: join(dir, "cli.db"), drop: async () => {} }
})
afterAll(async () => {
  await db.drop()
  rmSync(dir, { recursive: true, force: true })
})

const env = (extra: Record<string, string> = {}) => ({
  ...process.env,
  DATABASE_URL: db.url,
  GATEWAY_DATA_DIR: dir,
  GATEWAY_LOG_LEVEL: "none",
  ...extra,
})

/** Room for a test that starts the CLI several times (each start is a process of its own). */
const MANY_SPAWNS_MS = 90_000

const gateway = (args: Array<string>, extra: Record<string, string> = {}) => {
  const proc = Bun.spawnSync([process.execPath, "src/main.ts", ...args], { cwd: root, env: env(extra) })
  return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() }
}

describe("gateway migrate", () => {
  test("applies the migrations once, then says the database is up to date", () => {
    const first = gateway(["migrate"])
    expect(first.code).toBe(0)
    expect(first.out).toContain("Applied: 1_foundation")
    const second = gateway(["migrate"])
    expect(second.out).toContain("up to date")
  })

  test("a database a newer build migrated is used, with a warning naming the migrations this build does not know", () => {
    const file = join(dir, "newer.db")
    expect(gateway(["migrate"], { DATABASE_URL: file }).code).toBe(0)
    const sqlite = new Database(file)
    sqlite.run("INSERT INTO schema_migrations (id, name, applied_at) VALUES (999, 'from_the_future', '2030-01-01T00:00:00Z')")
    sqlite.close()
    const run = gateway(["migrate"], { DATABASE_URL: file, GATEWAY_LOG_LEVEL: "info" })
    expect(run.code).toBe(0)
    expect(`${run.out}${run.err}`).toContain("the database has migrations this build does not know (999)")
  })
})

describe("gateway keys", () => {
  test("create prints the secret once; list shows the key without it", () => {
    const made = gateway(["keys", "create", "--name", "cli key", "--limit", "2.5", "--limit-reset", "weekly"])
    expect(made.code).toBe(0)
    const secret = /Secret \(shown only now\): (sk-gw-v1-[0-9a-f]{64})/.exec(made.out)?.[1]
    expect(secret).toBeDefined()
    const listed = gateway(["keys", "list"])
    expect(listed.code).toBe(0)
    expect(listed.out).toContain('"cli key"')
    expect(listed.out).toContain("limit $2.5/weekly")
    expect(listed.out).not.toContain(secret!)
  })

  test("a bad --limit-reset is refused with a non-zero exit", () => {
    const bad = gateway(["keys", "create", "--name", "x", "--limit-reset", "yearly"])
    expect(bad.code).not.toBe(0)
  })

  test("--limit and --name are held to the API's rules: one line naming the flag, nothing created", () => {
    const before = gateway(["keys", "list"]).out
    for (const [args, rule] of [
      [["--limit", "-5"], "--limit: must be ≥ 0 (USD)"],
      [["--limit", "1e20"], "--limit: must be at most 9000000"],
      [["--limit", "NaN"], "--limit: must be a finite number"],
    ] as const) {
      const bad = gateway(["keys", "create", "--name", "refused", ...args])
      expect([bad.code, bad.err.trim()]).toEqual([1, expect.stringContaining(`gateway: ${rule}`)])
    }
    const long = gateway(["keys", "create", "--name", "n".repeat(3_000)])
    expect([long.code, long.err]).toEqual([1, expect.stringContaining("--name: ")])
    expect(gateway(["keys", "list"]).out).toBe(before)
  })
})

describe("gateway credits add", () => {
  test("adds to the user's balance", () => {
    expect(gateway(["keys", "create", "--name", "credited", "--user", "user_cli"]).code).toBe(0)
    const out = gateway(["credits", "add", "--user", "user_cli", "--amount", "12.5"])
    expect(out.code).toBe(0)
    expect(out.out).toContain("total_credits=12.5")
  })

  test("an --amount past the money's range is refused", () => {
    const out = gateway(["credits", "add", "--user", "user_cli", "--amount", "1e30"])
    expect([out.code, out.err]).toEqual([1, expect.stringContaining("--amount: must be a positive number of USD, at most 9000000")])
  })
})

describe("usage errors", () => {
  test("print @effect/cli's one line and the command's usage, no Effect internals, exit 2", () => {
    for (const [args, usage] of [
      [["credits", "add", "--user", "u"], "usage: gateway credits add --user text --amount float"],
      [["credits", "add", "--user", "u", "--amount", "lots"], "usage: gateway credits add --user text --amount float"],
      [["keys", "create"], "usage: gateway keys create --name text"],
      [["no-such-command"], "usage: gateway serve | migrate | keys create"],
    ] as const) {
      const out = gateway([...args])
      expect({ args, code: out.code }).toEqual({ args, code: 2 })
      expect(out.err).not.toContain("_tag")
      expect(out.err).not.toContain("ERROR")
      expect(out.err).toContain(usage)
      expect(out.err.trim().split("\n").filter((l) => l.trim() !== "")).toHaveLength(2)
    }
  }, MANY_SPAWNS_MS)
})

describe("a database that cannot be reached", () => {
  test("stops a command and start-up with one line naming it, no stack, exit 1", () => {
    // Nothing listens on port 1: the connection is refused (as "too many clients" or a stopped server would be).
    for (const args of [["keys", "list"], ["serve"]]) {
      const run = gateway(args, { DATABASE_URL: "postgres://postgres@127.0.0.1:1/gw", PORT: "0" })
      expect(run.code).toBe(1)
      expect(run.err).toBe("gateway: the database cannot be reached (DATABASE_URL postgres://postgres@127.0.0.1:1/gw): PgClient: Failed to connect: connect ECONNREFUSED 127.0.0.1:1\n")
    }
  })
})

describe("gateway credits add refuses", () => {
  test("an unknown user, with one line and exit 1", () => {
    const out = gateway(["credits", "add", "--user", "user_nobody", "--amount", "5"])
    expect(out.code).toBe(1)
    expect(out.err.trim().split("\n")).toEqual([expect.stringContaining("no user user_nobody")])
  })

  test("zero, negative and non-finite amounts", () => {
    expect(gateway(["keys", "create", "--name", "funded", "--user", "user_funded"]).code).toBe(0)
    for (const amount of ["0", "-5", "NaN", "Infinity"]) {
      const out = gateway(["credits", "add", "--user", "user_funded", "--amount", amount])
      expect({ amount, code: out.code }).toEqual({ amount, code: 1 })
      expect(out.err).toContain("--amount: must be a positive number")
    }
    const ok = gateway(["credits", "add", "--user", "user_funded", "--amount", "3"])
    expect(ok.code).toBe(0)
    expect(ok.out).toContain("total_credits=3")
  }, MANY_SPAWNS_MS)
})

describe("--workspace <slug> with several users (each has a 'default')", () => {
  let own: TestDatabase
  beforeAll(async () => {
    own = engine === "postgres" ? await freshDatabase() : { url: join(dir, "slugs.db"), drop: async () => {} }
  })
  afterAll(async () => {
    await own.drop()
  })
  const run = (args: Array<string>) => gateway(args, { DATABASE_URL: own.url })

  test("resolves among the acting user's workspaces: the first management key's owner, or --as", () => {
    expect(run(["keys", "create", "--management", "--name", "operator", "--user", "user_operator"]).code).toBe(0)
    expect(run(["keys", "create", "--name", "other", "--user", "user_other"]).code).toBe(0)
    const added = run(["members", "add", "--workspace", "default", "--user", "user_new"])
    expect(added.err).toBe("")
    expect(added.code).toBe(0)
    const listed = run(["members", "list", "--workspace", "default"])
    expect(listed.code).toBe(0)
    expect(listed.out).toContain("user_operator  admin")
    expect(listed.out).toContain("user_new  member")
    const theirs = run(["members", "list", "--workspace", "default", "--as", "user_other"])
    expect(theirs.code).toBe(0)
    expect(theirs.out).toContain("user_other  admin")
    expect(theirs.out).not.toContain("user_new")
  }, MANY_SPAWNS_MS)

  test("a slug none of the acting user's workspaces has, and several others have, is refused with one line", () => {
    const out = run(["members", "list", "--workspace", "default", "--as", "user_stranger"])
    expect(out.code).toBe(1)
    expect(out.err.trim().split("\n")).toEqual([expect.stringContaining("workspaces have the slug 'default'")])
  })
})

describe("gateway serve", () => {
  const serveOnce = async (extra: Record<string, string>) => {
    const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
      cwd: root,
      env: env({ PORT: "0", HOST: "127.0.0.1", ...extra }),
      stdout: "pipe",
      stderr: "pipe",
    })
    const reader = proc.stdout.getReader()
    let out = ""
    const deadline = Date.now() + 15_000
    while (!/listening on (http:\/\/\S+)\/v1/.test(out) && Date.now() < deadline) {
      const { value, done } = await reader.read()
      if (done) break
      out += new TextDecoder().decode(value)
    }
    // The key banner follows the first line.
    await Bun.sleep(100)
    const more = await Promise.race([reader.read(), Bun.sleep(200).then(() => undefined)])
    if (more?.value) out += new TextDecoder().decode(more.value)
    const url = /listening on (http:\/\/\S+)\/v1/.exec(out)?.[1]
    return { proc, out, url }
  }

  test("serves /v1/health; GATEWAY_MANAGEMENT_KEY makes that exact key work; SIGTERM exits 0", async () => {
    const secret = `sk-gw-v1-${"ab".repeat(32)}`
    const { proc, url } = await serveOnce({ GATEWAY_MANAGEMENT_KEY: secret })
    try {
      expect(url).toBeDefined()
      expect((await fetch(`${url}/v1/health`)).status).toBe(200)
      const me = await fetch(`${url}/v1/key`, { headers: { authorization: `Bearer ${secret}` } })
      expect(me.status).toBe(200)
      expect(((await me.json()) as { data: { is_management_key: boolean } }).data.is_management_key).toBe(true)
    } finally {
      proc.kill("SIGTERM")
    }
    expect(await proc.exited).toBe(0)
  })

  test("GATEWAY_MANAGEMENT_KEY's key deleted or disabled through the API: the next start makes it usable again", async () => {
    const own = engine === "postgres" ? await freshDatabase() : { url: join(dir, "mgmt-reinstated.db"), drop: async () => {} }
    const secret = `sk-gw-v1-${"cd".repeat(32)}`
    const startWith = async () => {
      const started = await serveOnce({ GATEWAY_MANAGEMENT_KEY: secret, DATABASE_URL: own.url })
      expect(started.url).toBeDefined()
      return started
    }
    const call = (url: string | undefined, path: string, init: RequestInit = {}) =>
      fetch(`${url}/v1${path}`, { ...init, headers: { authorization: `Bearer ${secret}`, "content-type": "application/json" } })
    const stop = async (proc: ReturnType<typeof Bun.spawn>) => {
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    }
    try {
      for (const undo of [{ method: "DELETE" }, { method: "PATCH", body: JSON.stringify({ disabled: true }) }]) {
        const first = await startWith()
        const listed = (await (await call(first.url, "/keys")).json()) as { data: Array<{ hash: string; name: string }> }
        const hash = listed.data.find((k) => k.name.includes("GATEWAY_MANAGEMENT_KEY"))?.hash
        expect((await call(first.url, `/keys/${hash}`, undo)).status).toBe(200)
        expect((await call(first.url, "/key")).status).toBe(401)
        await stop(first.proc)
        // Deleted, the next start stopped on the hash's unique index; disabled, every call was refused.
        const again = await startWith()
        const me = await call(again.url, "/key")
        expect([undo.method, me.status]).toEqual([undo.method, 200])
        expect(((await me.json()) as { data: { is_management_key: boolean } }).data.is_management_key).toBe(true)
        await stop(again.proc)
      }
    } finally {
      await own.drop()
    }
  }, MANY_SPAWNS_MS)

  test("a start that creates no key says in one line how to make another", async () => {
    const { proc, out } = await serveOnce({})
    try {
      expect(out).toContain("make another with: gateway keys create --management")
      expect(out).not.toContain("sk-gw-v1-")
    } finally {
      proc.kill("SIGTERM")
    }
    expect(await proc.exited).toBe(0)
  })

  test("a port in use stops start-up with one line naming the port", () => {
    const taken = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("taken") })
    try {
      const out = gateway(["serve"], { PORT: String(taken.port), HOST: "127.0.0.1" })
      expect(out.code).toBe(1)
      expect(out.err.trim().split("\n")).toEqual([`gateway: port ${taken.port} on 127.0.0.1 is in use (another gateway?); set PORT to a free port`])
    } finally {
      taken.stop(true)
    }
  })

  test("an unknown key in the config file stops start-up with one line: the file, the path, unknown key", () => {
    const file = join(dir, "unknown-key.json")
    writeFileSync(file, JSON.stringify({ providers: [{ id: "p", kind: "fake", bse_url: "http://x" }], models: [] }))
    const out = gateway(["serve"], { GATEWAY_CONFIG: file, PORT: "0" })
    expect(out.code).toBe(1)
    expect(out.err.trim().split("\n")).toEqual([`gateway: configuration error: ${file}: providers[0].bse_url: unknown key`])
  })

  test("a bad config file stops start-up with one line naming the file, the path and the rule", () => {
    const file = join(dir, "bad.json")
    writeFileSync(
      file,
      JSON.stringify({ providers: [{ id: "p", kind: "fake" }], models: [{ id: "a/b", context_length: -5, endpoints: [] }] }),
    )
    const out = gateway(["serve"], { GATEWAY_CONFIG: file, PORT: "0" })
    expect(out.code).toBe(1)
    expect(out.err.trim().split("\n")).toHaveLength(1)
    expect(out.err).toContain(file)
    expect(out.err).toContain("models[0].context_length")
    expect(out.err).toContain("positive integer")
    expect(out.err).not.toContain("    at ")
  })

  test("an endpoint naming an unknown provider is refused the same way", () => {
    const file = join(dir, "bad-ref.json")
    writeFileSync(
      file,
      JSON.stringify({
        providers: [],
        models: [{ id: "a/b", context_length: 5, endpoints: [{ provider: "nope", upstream_model: "x", pricing: { prompt: 1, completion: 1 } }] }],
      }),
    )
    const out = gateway(["serve"], { GATEWAY_CONFIG: file, PORT: "0" })
    expect(out.code).toBe(1)
    expect(out.err).toContain('models[0].endpoints[0].provider: unknown provider "nope"')
  })
})
