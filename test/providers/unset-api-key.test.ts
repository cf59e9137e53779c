/**
 * A provider whose `api_key_env` variable is not set: a warning at start names the provider and the
 * variable, and the 502 its upstream's refusal causes is logged with both; the caller's answer stays
 * generic (the variable is the operator's business).
 */
import { afterAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { providersWithoutKey } from "../../src/services/Catalog.js"

const root = join(import.meta.dir, "..", "..")
const dir = mkdtempSync(join(tmpdir(), "gw-unset-key-"))
const KEY = `sk-gw-v1-${"c".repeat(64)}`
const VARIABLE = "GW_TEST_UNSET_PROVIDER_KEY"

// An upstream that refuses any call without credentials, as the real ones do.
const upstream = Bun.serve({
  port: 0,
  hostname: "127.0.0.1",
  fetch: (req) =>
    req.headers.has("authorization")
      ? Response.json({ error: "unexpected key" }, { status: 500 })
      : Response.json({ error: { message: "Missing bearer token", type: "invalid_request_error" } }, { status: 401 }),
})

afterAll(() => {
  upstream.stop(true)
  rmSync(dir, { recursive: true, force: true })
})

describe("a provider whose api_key_env is not set", () => {
  test("is named with its variable in a warning at start and in the 502's log line; the caller's 502 is generic", async () => {
    const config = join(dir, "config.json")
    writeFileSync(
      config,
      JSON.stringify({
        providers: [
          { id: "keyless", kind: "openai-chat", base_url: `${upstream.url.origin}/v1`, api_key_env: VARIABLE },
          // A Vertex provider whose credentials file is not there: read at its first call (docs/providers.md).
          { id: "vx", kind: "vertex", base_url: `${upstream.url.origin}/v1`, project: "p", location: "us-central1", credentials_file: join(dir, "missing-key.json") },
        ],
        models: [
          { id: "test/keyless", context_length: 8000, endpoints: [{ provider: "keyless", upstream_model: "m", pricing: { prompt: 1, completion: 1 } }] },
          { id: "test/vx", context_length: 8000, endpoints: [{ provider: "vx", upstream_model: "gemini-x", pricing: { prompt: 1, completion: 1 } }] },
        ],
      }),
    )
    const env: Record<string, string | undefined> = {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: ":memory:",
      GATEWAY_DATA_DIR: dir,
      GATEWAY_CONFIG: config,
      GATEWAY_MANAGEMENT_KEY: KEY,
      GATEWAY_LOG_LEVEL: "info",
    }
    delete env[VARIABLE]
    const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], { cwd: root, env, stdout: "pipe", stderr: "pipe" })
    let out = ""
    const reading = (async () => {
      const decoder = new TextDecoder()
      for await (const chunk of proc.stdout as ReadableStream<Uint8Array>) out += decoder.decode(chunk, { stream: true })
    })()
    /** Waits (at most 15 s) until the output has a line matching `pattern`, and returns it. */
    const lineMatching = async (pattern: RegExp): Promise<string> => {
      for (let i = 0; i < 300; i++) {
        const line = out.split("\n").find((l) => pattern.test(l))
        if (line !== undefined) return line
        await Bun.sleep(50)
      }
      throw new Error(`no line matching ${pattern} in: ${out}`)
    }
    try {
      const url = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(await lineMatching(/listening on/))?.[1]
      const warning = await lineMatching(/"level":"(warn|warning)"/i)
      expect(warning).toContain("keyless")
      expect(warning).toContain(VARIABLE)

      const res = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "test/keyless", input: "hi" }),
      })
      const body = (await res.json()) as { error: { message: string } }
      expect(res.status).toBe(502)
      expect(body.error.message).not.toContain(VARIABLE)
      const logged = await lineMatching(new RegExp(`"level":"error".*${VARIABLE}`))
      expect(logged).toContain("keyless")
      expect(logged).toContain("request_id")

      // Any other refusal of the gateway's credentials is logged with its reason: here the missing file.
      const vertex = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "test/vx", input: "hi" }),
      })
      expect(vertex.status).toBe(502)
      const reason = await lineMatching(/"level":"error".*missing-key\.json/)
      expect(reason).toContain("ENOENT")
    } finally {
      proc.kill("SIGTERM")
      await proc.exited
      await reading
    }
  }, 60_000)

  test("an empty variable counts as unset; a set one does not", () => {
    const providers = [
      { id: "a", kind: "openai-chat" as const, api_key_env: "A_KEY" },
      { id: "b", kind: "openai-chat" as const, api_key_env: "B_KEY" },
      { id: "c", kind: "fake" as const },
    ]
    expect(providersWithoutKey(providers, { A_KEY: "", B_KEY: "sk-1" }).map((p) => p.id)).toEqual(["a"])
  })
})
