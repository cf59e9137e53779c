/**
 * The compiled binary (`scripts/build` → dist/gateway, built here when missing or older than the
 * sources) end to end: it starts from a folder without the project (the demo catalog and the
 * migrations are embedded), serves the openai client in front of the mock upstream, exposes
 * /metrics, parses a PDF and reads a web page in its embedded workers, checkpoints its SQLite file
 * from its embedded checkpointer, serves the web console from its embedded bundle, and exits 0 on
 * SIGTERM.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { execSync } from "node:child_process"
import { mkdtempSync, rmSync, statSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import OpenAI from "openai"
import { PDFDocument, StandardFonts } from "pdf-lib"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { allSpans, normalProtobuf } from "../broadcast/exporters-support.js"
import { untilListening } from "../support/spawned.js"

const root = join(import.meta.dir, "..", "..")
const binary = join(root, "dist", "gateway")
const KEY = `sk-test-binary-${crypto.randomUUID().replaceAll("-", "")}`

let mock: MockUpstream
let dir: string
const running: Array<ReturnType<typeof Bun.spawn>> = []

beforeAll(() => {
  execSync("bash scripts/build --if-stale", { cwd: root, stdio: ["ignore", "ignore", "inherit"], timeout: 50_000 })
  dir = mkdtempSync(join(tmpdir(), "gw-binary-"))
}, 60_000)

afterAll(async () => {
  for (const proc of running) proc.kill("SIGKILL")
  await mock?.stop()
  rmSync(dir, { recursive: true, force: true })
})

/** Starts the binary in `dir` (not the project) on a free port; resolves with its base URL. */
const start = async (env: Record<string, string>) => {
  const proc = Bun.spawn([binary, "serve"], {
    cwd: dir,
    env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, GATEWAY_MANAGEMENT_KEY: KEY, GATEWAY_LOG_LEVEL: "none", ...env },
    stdout: "pipe",
    stderr: "inherit",
  })
  running.push(proc)
  return { proc, url: await untilListening(proc, "the binary") }
}

describe("dist/gateway", () => {
  test("runs outside the project on its embedded demo catalog and migrations", async () => {
    const { proc, url } = await start({ DATABASE_URL: join(dir, "demo.db") })
    const client = new OpenAI({ apiKey: KEY, baseURL: `${url}/v1`, maxRetries: 0 })
    const response = await client.responses.create({ model: "demo/echo", input: "hello binary" })
    expect(response.output_text).toBe("Echo: hello binary")
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  }, 20_000)

  test("serves the console from its embedded bundle: the page, its hashed assets immutable under /console/assets/", async () => {
    const { proc, url } = await start({ DATABASE_URL: join(dir, "console.db") })
    const page = await fetch(`${url}/console`)
    expect(page.status).toBe(200)
    expect(page.headers.get("content-security-policy")).toContain("frame-ancestors 'none'")
    const html = await page.text()
    const assets = [...html.matchAll(/(?:src|href)="(\/console\/assets\/[^"]+)"/g)].map((m) => m[1] as string)
    expect(assets.length).toBeGreaterThanOrEqual(2)
    for (const asset of assets) {
      const res = await fetch(`${url}${asset}`)
      expect(res.status).toBe(200)
      expect(res.headers.get("cache-control")).toContain("immutable")
      expect((await res.arrayBuffer()).byteLength).toBeGreaterThan(1000)
    }
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  }, 20_000)

  test("relays the mock upstream (openai-chat) as JSON and as a stream, and counts both in /metrics", async () => {
    mock = await startMockUpstream({ port: 0, tokens: 4, chunk: "hi ", maxLoggedRequests: 0 })
    const config = join(dir, "config.json")
    writeFileSync(
      config,
      JSON.stringify({
        providers: [{ id: "mock", kind: "openai-chat", base_url: mock.url }],
        models: [{ id: "bench/json", context_length: 128000, endpoints: [{ provider: "mock", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] }],
      }),
    )
    const metricsToken = "binary-test-metrics-token"
    const { proc, url } = await start({ DATABASE_URL: join(dir, "mock.db"), GATEWAY_CONFIG: config, GATEWAY_METRICS_TOKEN: metricsToken })
    const client = new OpenAI({ apiKey: KEY, baseURL: `${url}/v1`, maxRetries: 0 })

    const response = await client.responses.create({ model: "bench/json", input: "say hi" })
    expect(response.output_text).toBe("hi hi hi hi ")
    expect(response.usage?.output_tokens).toBe(4)

    const stream = await client.responses.create({ model: "bench/json", input: "say hi", stream: true })
    let text = ""
    for await (const event of stream) if (event.type === "response.output_text.delta") text += event.delta
    expect(text).toBe("hi hi hi hi ")

    const metrics = await (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${metricsToken}` } })).text()
    expect(metrics).toContain('gateway_http_requests_total{route="/v1/responses",method="POST",status="200"} 2')
    expect(metrics).toContain('gateway_upstream_duration_seconds_count{provider="mock"} 2')
    expect(metrics).toContain("gateway_streams_total 1")
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  }, 20_000)

  test("checkpoints its SQLite file from its embedded checkpointer Worker, not on the request thread", async () => {
    const file = join(dir, "checkpoints.db")
    const { proc } = await start({ DATABASE_URL: file })
    // The migrations wrote the schema to the log; the request thread's connections leave it there
    // (their own mark is ~64 MB), so only the Worker's checkpoint, once the log has been quiet
    // for 10 s, brings the file past its first page.
    expect(statSync(file).size).toBeLessThanOrEqual(4096)
    const end = Date.now() + 20_000
    while (statSync(file).size <= 4096 && Date.now() < end) await Bun.sleep(100)
    expect(statSync(file).size).toBeGreaterThan(4096)
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
  }, 30_000)

  test("parses a PDF in its embedded worker (file-parser, pdf-text) and sends the text upstream", async () => {
    const upstream = await startMockUpstream({ port: 0, tokens: 2 })
    try {
      const config = join(dir, "pdf.json")
      writeFileSync(
        config,
        JSON.stringify({
          providers: [{ id: "mock", kind: "openai-chat", base_url: upstream.url }],
          models: [{ id: "pdf/text", context_length: 128000, endpoints: [{ provider: "mock", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] }],
        }),
      )
      const doc = await PDFDocument.create()
      const font = await doc.embedFont(StandardFonts.Helvetica)
      doc.addPage().drawText("The binary read this PDF.", { x: 50, y: 700, font, size: 12 })
      const fileData = `data:application/pdf;base64,${Buffer.from(await doc.save()).toString("base64")}`
      const { proc, url } = await start({ DATABASE_URL: join(dir, "pdf.db"), GATEWAY_CONFIG: config })
      const res = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({
          model: "pdf/text",
          input: [{ type: "message", role: "user", content: [{ type: "input_file", filename: "b.pdf", file_data: fileData }] }],
          plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }],
        }),
      })
      expect(res.status).toBe(200)
      expect(JSON.stringify(upstream.requests.map((r) => r.body))).toContain("The binary read this PDF.")
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    } finally {
      await upstream.stop()
    }
  }, 30_000)

  test("reads a linked web page in its embedded page worker (web-fetch) and sends the text upstream", async () => {
    const upstream = await startMockUpstream({ port: 0, tokens: 2 })
    const page = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: () => new Response("<p>The binary read this page.</p>", { headers: { "content-type": "text/html" } }),
    })
    try {
      const config = join(dir, "page.json")
      writeFileSync(
        config,
        JSON.stringify({
          providers: [{ id: "mock", kind: "openai-chat", base_url: upstream.url }],
          models: [{ id: "page/text", context_length: 128000, endpoints: [{ provider: "mock", upstream_model: "m", pricing: { prompt: 1, completion: 2 } }] }],
          outbound: { allow_private_addresses: true },
        }),
      )
      const { proc, url } = await start({ DATABASE_URL: join(dir, "page.db"), GATEWAY_CONFIG: config })
      const res = await fetch(`${url}/v1/responses`, {
        method: "POST",
        headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
        body: JSON.stringify({ model: "page/text", input: `Summarise http://127.0.0.1:${page.port}/p`, plugins: [{ id: "web-fetch" }] }),
      })
      expect(res.status).toBe(200)
      expect(JSON.stringify(upstream.requests.map((r) => r.body))).toContain("The binary read this page.")
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    } finally {
      page.stop(true)
      await upstream.stop()
    }
  }, 30_000)
})

describe("dist/gateway broadcast", () => {
  test("delivers generations to a destination from its embedded delivery Worker, as OTLP JSON and as protobuf", async () => {
    const seen = new Set<string>()
    // The protobuf body is written by OpenTelemetry's serializer, loaded on first use (src/broadcast/otel-sdk.ts): in the binary too.
    const seenProtobuf = new Set<string>()
    const receiver = Bun.serve({
      port: 0,
      hostname: "127.0.0.1",
      fetch: async (req) => {
        if (req.headers.get("content-type") === "application/x-protobuf") {
          const trace = normalProtobuf(new Uint8Array(await req.arrayBuffer()))
          for (const span of allSpans(trace)) {
            const id = span.attributes["gen_ai.response.id"]
            if (typeof id === "string") seenProtobuf.add(id)
          }
          return new Response("{}")
        }
        const body = (await req.json()) as {
          resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ attributes: Array<{ key: string; value: { stringValue?: string } }> }> }> }>
        }
        for (const span of body.resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))) {
          const id = span.attributes.find((a) => a.key === "gen_ai.response.id")?.value.stringValue
          if (id !== undefined) seen.add(id)
        }
        return new Response("{}")
      },
    })
    try {
      const config = join(dir, "broadcast.json")
      const demo = JSON.parse(await Bun.file(join(root, "config", "demo.json")).text()) as Record<string, unknown>
      writeFileSync(config, JSON.stringify({ ...demo, outbound: { allow_private_addresses: true } }))
      const { proc, url } = await start({ DATABASE_URL: join(dir, "broadcast.db"), GATEWAY_CONFIG: config })
      const call = (path: string, init: { method?: string; json?: unknown } = {}) =>
        fetch(`${url}${path}`, {
          method: init.method ?? (init.json === undefined ? "GET" : "POST"),
          headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
          ...(init.json === undefined ? {} : { body: JSON.stringify(init.json) }),
        })
      const workspace = ((await (await call("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id
      expect((await call(`/v1/workspaces/${workspace}`, { method: "PATCH", json: { is_observability_broadcast_enabled: true } })).status).toBe(200)
      const created = await call("/v1/observability/destinations", {
        json: { name: "c", type: "otel-collector", config: { endpoint: `http://127.0.0.1:${receiver.port}` } },
      })
      expect(created.status).toBe(201)
      const grafana = await call("/v1/observability/destinations", {
        json: { name: "g", type: "grafana", config: { apiKey: "k", instanceId: "1", endpoint: `http://127.0.0.1:${receiver.port}/otlp` } },
      })
      expect(grafana.status).toBe(201)
      const ids: Array<string> = []
      for (let i = 0; i < 5; i++) {
        const res = await call("/v1/responses", { json: { model: "demo/echo", input: `broadcast ${i}` } })
        expect(res.status).toBe(200)
        await res.text()
        ids.push(res.headers.get("x-generation-id") as string)
      }
      const until = Date.now() + 10_000
      while (!ids.every((id) => seen.has(id) && seenProtobuf.has(id)) && Date.now() < until) await Bun.sleep(50)
      expect(ids.filter((id) => !seen.has(id))).toEqual([])
      expect(ids.filter((id) => !seenProtobuf.has(id))).toEqual([])
      proc.kill("SIGTERM")
      expect(await proc.exited).toBe(0)
    } finally {
      receiver.stop(true)
    }
  }, 30_000)
})
