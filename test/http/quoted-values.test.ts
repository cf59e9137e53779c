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
    ["control plane: a wrong literal", "/v1/keys", { name: "k", limit_reset: huge }, 400],
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
