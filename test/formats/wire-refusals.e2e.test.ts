/**
 * Bad input the gateway refuses itself, in the client format's envelope and before any upstream
 * call: a malformed data URL on POST /v1/responses, and Anthropic's image rules of a Messages body. An in-process gateway over the mock upstream, whose log holds what
 * it was sent.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile } from "../../src/config/file.js"
import { expectError, startInProcessGateway, type InProcessGateway } from "../support/gateway.js"

let mock: MockUpstream
let gw: InProcessGateway & { stop: () => Promise<void> }

const SUPPORTS = ["tools"]

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  gw = await startInProcessGateway({
    catalog: {
      providers: [
        { id: "claude", kind: "anthropic", base_url: mock.url },
        { id: "chatty", kind: "openai-chat", base_url: mock.url },
      ],
      models: [
        { id: "t/claude", context_length: 200_000, endpoints: [{ provider: "claude", upstream_model: "claude-x", pricing: { prompt: 1, completion: 2 }, supports: SUPPORTS }] },
        { id: "t/chat", context_length: 200_000, endpoints: [{ provider: "chatty", upstream_model: "gpt-x", pricing: { prompt: 1, completion: 2 }, supports: SUPPORTS }] },
      ],
    } as unknown as ConfigFile,
  })
})
afterAll(async () => {
  await gw?.stop()
  await mock?.stop()
})

/** The bodies the mock upstream was sent while `call` ran. */
const sentDuring = async (call: () => Promise<Response>) => {
  const from = mock.requests.length
  const res = await call()
  return { res, sent: mock.requests.slice(from).map((r) => r.body as Record<string, unknown>) }
}

const post = (path: string, json: unknown) => gw.fetch(path, { method: "POST", json })

describe("POST /v1/responses: an image's data URL", () => {
  test("data:image/png;base64 without a comma or data is a 400 naming image_url, not sent upstream as a URL", async () => {
    for (const url of ["data:image/png;base64", "data:image/png;base64,", "data:;base64,AAAA", "data:image/png,AAAA"]) {
      const { res, sent } = await sentDuring(() =>
        post("/v1/responses", { model: "t/claude", input: [{ role: "user", content: [{ type: "input_image", image_url: url }] }] }),
      )
      expect(await expectError(res, 400)).toBe("Invalid request: input[0].content[0].image_url: a data URL must be data:<media type>;base64,<data>")
      expect(sent).toEqual([])
    }
  })

  test("a well-formed data URL goes to an anthropic upstream as a base64 source", async () => {
    const { res, sent } = await sentDuring(() =>
      post("/v1/responses", { model: "t/claude", input: [{ role: "user", content: [{ type: "input_image", image_url: "data:image/png;base64,iVBORw==" }] }] }),
    )
    expect(res.status).toBe(200)
    await res.text()
    const messages = sent[0]?.["messages"] as ReadonlyArray<{ readonly content: ReadonlyArray<unknown> }>
    expect(messages[0].content[0]).toEqual({ type: "image", source: { type: "base64", media_type: "image/png", data: "iVBORw==" } })
  })
})

describe("POST /v1/messages: Anthropic's rules in Anthropic's envelope", () => {
  const messagesError = async (res: Response) => {
    expect(res.status).toBe(400)
    const body = (await res.json()) as { type?: string; error?: { type?: string; message?: string } }
    expect(body.type).toBe("error")
    expect(body.error?.type).toBe("invalid_request_error")
    return body.error?.message
  }

  test("an image/bmp and data that is not base64 are 400s, no upstream call", async () => {
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [[{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/bmp", data: "AAAA" } }] }], "messages[0].content[0].source.media_type: one of image/jpeg"],
      [[{ role: "user", content: [{ type: "image", source: { type: "base64", media_type: "image/png", data: "%%%" } }] }], "messages[0].content[0].source.data: base64 data"],
    ]
    for (const [messages, rule] of cases) {
      const { res, sent } = await sentDuring(() => post("/v1/messages", { model: "t/claude", max_tokens: 64, messages }))
      expect(await messagesError(res)).toStartWith(`Invalid request: ${rule}`)
      expect(sent).toEqual([])
    }
  })
})
