/** Errors quote at most ~200 characters of a caller's value (a 1 MB value made a 1 MB 400 body). */
import { describe, expect, test } from "bun:test"
import { MAX_QUOTED } from "../../src/domain/validation.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const huge = "x".repeat(100_000)
/** The longest run of the value quoted back. */
const quotedRun = (message: string) => Math.max(0, ...(message.match(/x+/g) ?? []).map((r) => r.length))

describe("validation errors quote at most ~200 characters of the value", () => {
  const cases: Array<[string, string, unknown]> = [
    ["control plane: a wrong type", "/v1/keys", { name: "k", limit: huge }],
    ["control plane: a wrong literal", "/v1/keys", { name: "k", limit_reset: huge }],
    ["data plane: a wrong type", "/v1/responses", { model: "demo/echo", input: "hi", temperature: huge }],
    ["data plane: a metadata key", "/v1/responses", { model: "demo/echo", input: "hi", metadata: { [huge]: 5 } }],
    ["data plane: an unknown model", "/v1/responses", { model: huge, input: "hi" }],
    ["data plane: an unknown preset", "/v1/responses", { model: "demo/echo", preset: huge, input: "hi" }],
  ]
  for (const [name, path, body] of cases) {
    test(name, async () => {
      const res = await gw().fetch(path, { method: "POST", json: body })
      expect(res.status).toBeGreaterThanOrEqual(400)
      expect(res.status).toBeLessThan(500)
      const message = await expectError(res, res.status)
      expect(quotedRun(message)).toBeGreaterThan(0)
      expect(quotedRun(message)).toBeLessThanOrEqual(MAX_QUOTED)
      expect(message.length).toBeLessThan(MAX_QUOTED * 3)
    })
  }
})
