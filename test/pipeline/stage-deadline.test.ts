/**
 * The request's deadline covers the pre-model stages (every outbound call a plugin makes
 * has a timeout, is counted in the request's deadline): a moderation call or a `file_url` fetch
 * that outlasts it is aborted and the request answers 408 (recorded, the model never called); what
 * the stages used is gone from the model turn's deadline; a client that leaves aborts the call.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile } from "../../src/config/file.js"
import { clearFileParserCache } from "../../src/pipeline/plugins/file-parser.js"
import { expectError, startInProcessGateway, type InProcessGateway } from "../support/gateway.js"
import { endpoint, mockProvider, model } from "../routing/helpers.js"
import { bodyIn, type Format, FORMATS, PATHS } from "../support/formats.js"

type Gw = InProcessGateway & { stop: () => Promise<void> }

let mock: MockUpstream
/** A file server that answers only when its client goes away; it notes the requests that were aborted. */
let files: ReturnType<typeof Bun.serve>
let fileRequests = 0
let fileAborts = 0

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  files = Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    idleTimeout: 0,
    fetch: (req) => {
      fileRequests++
      return new Promise<Response>((resolve) => {
        req.signal.addEventListener("abort", () => {
          fileAborts++
          resolve(new Response(null, { status: 499 }))
        })
      })
    },
  })
})
afterAll(async () => {
  files?.stop(true)
  await mock?.stop()
})
beforeEach(() => {
  mock.requests.length = 0
  clearFileParserCache()
})

/** `modHeaders`: the mock moderation API's knobs (`x-mock-error: hang`, `x-mock-delay-ms`); `modelHeaders`: the model's. */
const catalog = (modHeaders: Record<string, string>, modelHeaders: Record<string, string> = {}): ConfigFile => ({
  providers: [mockProvider(mock, "p-model", modelHeaders), mockProvider(mock, "mod", modHeaders)],
  models: [model("test/model", endpoint("p-model", 1, 2))],
  plugins: { moderation: { provider: "mod", model: "omni-moderation-latest", timeout_ms: 30_000 } },
  outbound: { allow_private_addresses: true, timeout_ms: 30_000 },
})

const bodyOf = (format: Format, text: string, plugins: ReadonlyArray<Record<string, unknown>>) => bodyIn(format, "test/model", text, { plugins })

const modelCalls = () => mock.requests.filter((r) => r.path !== "/v1/moderations")

interface Record_ {
  readonly status: string
  readonly model: string
  readonly provider_name: string
  readonly total_cost: number
}

/** The generation record of `id`, once written. */
const recordOf = async (gw: Gw, id: string | null): Promise<Record_ | undefined> => {
  await gw.server.drain()
  for (let i = 0; i < 100; i++) {
    const res = await gw.fetch(`/v1/generation?id=${id}`)
    if (res.status === 200) return ((await res.json()) as { data: Record_ }).data
    await Bun.sleep(20)
  }
  return undefined
}

describe("a moderation call that outlasts the request's deadline", () => {
  let gw: Gw
  beforeAll(async () => {
    gw = await startInProcessGateway({ catalog: catalog({ "x-mock-error": "hang" }), requestTimeoutMs: 400 })
  })
  afterAll(async () => {
    await gw?.stop()
  })

  for (const format of FORMATS) {
    test(`${format}: 408 in the format's envelope, the model never called, the request recorded`, async () => {
      const res = await gw.fetch(PATHS[format], { method: "POST", json: bodyOf(format, "hello", [{ id: "moderation" }]) })
      const message = format === "messages" ? ((await res.json()) as { error: { message: string } }).error.message : await expectError(res, 408)
      expect(res.status).toBe(408)
      expect(message).toContain("deadline of 400 ms")
      expect(modelCalls()).toHaveLength(0)
      expect(mock.requests.filter((r) => r.path === "/v1/moderations")).toHaveLength(1)
      const record = await recordOf(gw, res.headers.get("x-generation-id"))
      expect(record).toMatchObject({ status: "failed", model: "test/model", provider_name: "p-model" })
    })
  }
})

describe("the model turn's deadline is what the stages left", () => {
  let slowStages: Gw
  let noStages: Gw
  beforeAll(async () => {
    // Moderation takes 1 s, the model 1 s: 2 s of a 1.5 s deadline. The model alone fits.
    const slowModel = { "x-mock-delay-ms": "1000" }
    slowStages = await startInProcessGateway({ catalog: catalog({ "x-mock-delay-ms": "1000" }, slowModel), requestTimeoutMs: 1500 })
    noStages = await startInProcessGateway({ catalog: catalog({}, slowModel), requestTimeoutMs: 1500 })
  })
  afterAll(async () => {
    await slowStages?.stop()
    await noStages?.stop()
  })

  test("a model answer that fits the deadline alone is cut when the stages used part of it: 408", async () => {
    const alone = await noStages.fetch("/v1/responses", { method: "POST", json: bodyOf("responses", "hello", []) })
    expect(alone.status).toBe(200)
    const res = await slowStages.fetch("/v1/responses", { method: "POST", json: bodyOf("responses", "hello", [{ id: "moderation" }]) })
    expect(await expectError(res, 408)).toContain("deadline of 1500 ms")
    // Moderation passed; the model was called and cut at the request's deadline.
    expect(modelCalls()).toHaveLength(2)
    const record = await recordOf(slowStages, res.headers.get("x-generation-id"))
    expect(record).toMatchObject({ status: "failed", provider_name: "p-model" })
  })
})

describe("a file_url fetch (file-parser)", () => {
  const fileBody = () => ({
    model: "test/model",
    input: [
      {
        type: "message",
        role: "user",
        content: [
          { type: "input_text", text: "Summarise" },
          { type: "input_file", filename: "slow.pdf", file_url: `http://127.0.0.1:${files.port}/slow.pdf` },
        ],
      },
    ],
    plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }],
  })
  const abortsSeen = async (before: number) => {
    for (let i = 0; i < 200 && fileAborts === before; i++) await Bun.sleep(10)
    return fileAborts - before
  }

  test("that outlasts the request's deadline: aborted, 408, recorded, the model never called", async () => {
    const gw = await startInProcessGateway({ catalog: catalog({}), requestTimeoutMs: 400 })
    try {
      const before = fileAborts
      const res = await gw.fetch("/v1/responses", { method: "POST", json: fileBody() })
      expect(await expectError(res, 408)).toContain("deadline of 400 ms")
      expect(await abortsSeen(before)).toBe(1)
      expect(modelCalls()).toHaveLength(0)
      expect(await recordOf(gw, res.headers.get("x-generation-id"))).toMatchObject({ status: "failed", provider_name: "p-model" })
    } finally {
      await gw.stop()
    }
  })

  test("whose client leaves: aborted, the request recorded as cancelled", async () => {
    const gw = await startInProcessGateway({ catalog: catalog({}), requestTimeoutMs: 60_000 })
    try {
      const before = fileAborts
      const requested = fileRequests
      const client = new AbortController()
      const pending = gw.fetch("/v1/responses", { method: "POST", json: fileBody(), signal: client.signal }).catch(() => undefined)
      for (let i = 0; i < 200 && fileRequests === requested; i++) await Bun.sleep(10)
      expect(fileRequests).toBe(requested + 1)
      client.abort()
      await pending
      expect(await abortsSeen(before)).toBe(1)
      expect(modelCalls()).toHaveLength(0)
      // The client has no answer to read the generation id from: the store has the one row.
      await gw.server.drain()
      const rows = await gw.server.runtime.runPromise(
        Effect.gen(function* () {
          const sql = yield* SqlClient.SqlClient
          return yield* sql<{ status: string; provider_name: string }>`SELECT status, provider_name FROM generations`
        }),
      )
      expect(rows).toEqual([{ status: "cancelled", provider_name: "p-model" }])
    } finally {
      await gw.stop()
    }
  })
})
