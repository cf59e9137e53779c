import { afterAll, beforeAll, describe, expect, test } from "bun:test"
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
})

describe("gateway credits add", () => {
  test("adds to the user's balance", () => {
    const out = gateway(["credits", "add", "--user", "user_cli", "--amount", "12.5"])
    expect(out.code).toBe(0)
    expect(out.out).toContain("total_credits=12.5")
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
