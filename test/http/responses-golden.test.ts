/**
 * The Responses wire output, pinned byte for byte (the stages must not change a byte of
 * what /v1/responses answers for the same upstream events). The fake provider's events are fixed;
 * only ids, clocks and the time taken are replaced (`normalize`) before the bodies are compared
 * with the files under test/http/golden/. A missing file fails the test: goldens are written only
 * with `GOLDEN_UPDATE=1` in the environment (`GOLDEN_UPDATE=1 node_modules/.bin/bun test
 * test/http/responses-golden.test.ts`), which rewrites every file; review the diff before committing.
 */
import { describe, expect, test } from "bun:test"
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { afterAll, beforeAll } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { demoCatalog } from "../../src/config/Config.js"
import { startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let mock: MockUpstream
let gateway: InProcessGateway & { stop: () => Promise<void> }
const gw = () => gateway
const UPSTREAMS = ["openai-chat", "openai-responses", "anthropic"] as const

beforeAll(async () => {
  process.env["MOCK_UPSTREAM_KEY"] = "sk-upstream-secret"
  mock = await startMockUpstream()
  gateway = await startInProcessGateway({
    catalog: {
      ...demoCatalog,
      providers: [
        ...demoCatalog.providers,
        ...UPSTREAMS.map((kind) => ({ id: `mock-${kind}`, kind, base_url: mock.url, api_key_env: "MOCK_UPSTREAM_KEY", headers: { "x-mock-tokens": "120" } })),
      ],
      models: [
        ...demoCatalog.models,
        ...UPSTREAMS.map((kind) => ({
          id: `mock/${kind}`,
          context_length: 100000,
          endpoints: [{ provider: `mock-${kind}`, upstream_model: `upstream-${kind}`, pricing: { prompt: 3, completion: 15 } }] as const,
        })),
      ],
    },
  })
})
afterAll(async () => {
  await gateway?.stop()
  await mock?.stop()
})
const GOLDEN = join(import.meta.dir, "golden")
const update = process.env["GOLDEN_UPDATE"] === "1"

/** Ids and clocks out: what stays is what the route and the assembler wrote. */
const normalize = (text: string): string =>
  text
    .replace(/\b(resp|msg|rs|fc|call)_[0-9a-f]{24}\b/g, "$1_ID")
    .replace(/gen-\d+-[0-9A-Za-z]{20}/g, "gen-ID")
    .replace(/"(created_at|completed_at|created)":\d+/g, '"$1":0')
    .replace(/"generation_time":\d+/g, '"generation_time":0')

const pinned = async (name: string, res: Response) => {
  const head = `${res.status} ${res.headers.get("content-type")} generation-id:${res.headers.get("x-generation-id") === null ? "none" : "set"}\n`
  const actual = normalize(head + (await res.text()))
  const file = join(GOLDEN, `${name}.txt`)
  if (update) {
    mkdirSync(GOLDEN, { recursive: true })
    writeFileSync(file, actual)
  } else if (!existsSync(file)) {
    // Writing it here would compare the output with itself and pass whatever the route wrote.
    throw new Error(`no golden file ${file}: run with GOLDEN_UPDATE=1 to write it, then review it`)
  }
  expect(actual).toBe(readFileSync(file, "utf8"))
}

const post = (json: unknown, headers: Record<string, string> = {}, key?: string | null) =>
  gw().fetch("/v1/responses", { method: "POST", json, headers, key })

/** demo/echo on its first endpoint ("fake"); the default spreads load by price. */
const PINNED = { model: "demo/echo", provider: { order: ["fake"] } }
const METADATA = { "x-service-metadata": "enabled" }

describe("POST /responses: the wire output is what it was for the same upstream events", () => {
  test("JSON: text, with routing metadata", async () => {
    await pinned("json-text-metadata", await post({ ...PINNED, input: "hello there world" }, METADATA))
  })

  test("JSON: reasoning then text, with the SDK's metadata alias", async () => {
    await pinned("json-reasoning-alias", await post({ ...PINNED, input: "think [reasoning]" }, { "x-openrouter-metadata": "enabled" }))
  })

  test("JSON: a function call, echoing the request's settings", async () => {
    await pinned(
      "json-tool",
      await post({
        ...PINNED,
        input: "weather? [tool:get_weather]",
        instructions: "be brief",
        temperature: 0.5,
        metadata: { a: "b" },
        tools: [{ type: "function", name: "get_weather", parameters: { type: "object", properties: {} } }],
      }),
    )
  })

  test("JSON: failover to the second endpoint, with metadata", async () => {
    await pinned("json-fallback", await post({ model: "demo/fallback", input: "hi" }, METADATA))
  })

  test("stream: text, with routing metadata", async () => {
    await pinned("stream-text-metadata", await post({ ...PINNED, input: "hello there world", stream: true }, METADATA))
  })

  test("stream: reasoning then a function call", async () => {
    await pinned(
      "stream-reasoning-tool",
      await post({
        ...PINNED,
        input: "weather? [reasoning] [tool:get_weather]",
        stream: true,
        tools: [{ type: "function", name: "get_weather", parameters: { type: "object", properties: {} } }],
      }),
    )
  })

  test("stream: a failure after the first byte", async () => {
    await pinned("stream-fail-mid", await post({ ...PINNED, input: "one two three four [fail-mid]", stream: true }))
  })

  for (const kind of UPSTREAMS) {
    test(`stream and JSON from a ${kind} upstream (its literal deltas written as bytes)`, async () => {
      await pinned(`upstream-${kind}-stream`, await post({ model: `mock/${kind}`, input: "hello", stream: true }, METADATA))
      await pinned(`upstream-${kind}-json`, await post({ model: `mock/${kind}`, input: "hello" }, METADATA))
    })
  }

  test("errors: a field refused, a missing key, an upstream failure", async () => {
    await pinned("error-400", await post({ ...PINNED, input: "hi", temperature: 9 }))
    await pinned("error-401", await post({ ...PINNED, input: "hi" }, {}, null))
    await pinned("error-502", await post({ ...PINNED, input: "hi [fail:500]", provider: { order: ["fake"], allow_fallbacks: false } }))
  })
})
