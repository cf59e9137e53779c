/** Errors quote at most ~200 characters of a caller's value (a 1 MB value made a 1 MB 400 body). */
import { describe, expect, test } from "bun:test"
import { MAX_QUOTED } from "../../src/domain/validation.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const huge = "x".repeat(100_000)
/** The longest run of the value quoted back. */
const quotedRun = (message: string) => Math.max(0, ...(message.match(/x+/g) ?? []).map((r) => r.length))

describe("validation errors quote at most ~200 characters of the value", () => {
  const cases: Array<[string, string, unknown, number]> = [
    ["control plane: a wrong type", "/v1/keys", { name: "k", limit: huge }, 400],
    ["control plane: a wrong type of another field", "/v1/keys", { name: "k", include_byok_in_limit: huge }, 400],
    ["data plane: a wrong type", "/v1/responses", { model: "demo/echo", input: "hi", temperature: huge }, 400],
    ["data plane: a metadata key", "/v1/responses", { model: "demo/echo", input: "hi", metadata: { [huge]: 5 } }, 400],
    ["data plane: an unknown model", "/v1/responses", { model: huge, input: "hi" }, 404],
    ["data plane: an unknown preset", "/v1/responses", { model: "demo/echo", preset: huge, input: "hi" }, 404],
  ]
  for (const [name, path, body, status] of cases) {
    test(`${name}: ${status}`, async () => {
      const res = await gw().fetch(path, { method: "POST", json: body })
      const message = await expectError(res, status)
      expect(quotedRun(message)).toBeGreaterThan(0)
      expect(quotedRun(message)).toBeLessThanOrEqual(MAX_QUOTED)
      expect(message.length).toBeLessThan(MAX_QUOTED * 3)
    })
  }
})

describe("not-found errors quote at most ~200 characters of the id or name in the path or query", () => {
  // Past the quote's 200 characters; a path segment much longer is no route at all (404 "No such endpoint").
  const long = "x".repeat(500)
  const cases: Array<[string, string, RequestInit & { json?: unknown }]> = [
    ["a generation", `/v1/generation?id=${long}`, {}],
    ["a generation's content", `/v1/generation/content?id=${long}`, {}],
    ["a key", `/v1/keys/${long}`, {}],
    ["a workspace", `/v1/workspaces/${long}`, {}],
    ["a destination", `/v1/observability/destinations/${long}`, {}],
    ["a generation to give feedback on", "/v1/generation/feedback", { method: "POST", json: { generation_id: long, category: "other" } }],
  ]
  for (const [name, path, init] of cases) {
    test(`${name}: 404`, async () => {
      const message = await expectError(await gw().fetch(path, init), 404)
      expect(quotedRun(message)).toBeGreaterThan(0)
      expect(quotedRun(message)).toBeLessThanOrEqual(MAX_QUOTED)
    })
  }
})
