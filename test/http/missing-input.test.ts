/** POST /v1/responses needs something to answer: `input` or `prompt` (a Chat Completions body was answered "Echo: " and billed). */
import { describe, expect, test } from "bun:test"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const usage = async () => ((await (await gw().fetch("/v1/credits")).json()) as { data: { total_usage: number } }).data.total_usage

describe("a request with nothing to answer", () => {
  test("a Chat Completions body (messages, no input) is a 400 naming input and saying to send it as input, and costs nothing", async () => {
    const before = await usage()
    for (const stream of [false, true]) {
      const res = await gw().fetch("/v1/responses", {
        method: "POST",
        json: { model: "demo/echo", stream, messages: [{ role: "user", content: "hi" }] },
      })
      const message = await expectError(res, 400)
      expect(message).toContain("input: is missing")
      expect(message).toContain("messages")
      expect(message).toContain("send the conversation as `input`")
    }
    expect(await usage()).toBe(before)
  })

  test("a body with neither input nor prompt is a 400 naming input (the plain-code path too)", async () => {
    for (const body of [{ model: "demo/echo" }, { model: "demo/echo", stream: false }, { model: "demo/echo", temperature: 1 }, {}]) {
      const res = await gw().fetch("/v1/responses", { method: "POST", json: body })
      expect(await expectError(res, 400)).toContain("input: is missing")
    }
  })

  test("a preset request without input is refused the same way (the preset's body never carries input)", async () => {
    const made = await gw().fetch("/v1/presets/no-input/responses", { method: "POST", json: { model: "demo/echo", instructions: "Be brief" } })
    expect(made.status).toBeLessThan(300)
    await made.text()
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "@preset/no-input" } })
    expect(await expectError(res, 400)).toContain("input: is missing")
  })

  test("input (even empty) or prompt is enough", async () => {
    for (const body of [
      { model: "demo/echo", input: "" },
      { model: "demo/echo", input: [] },
      { model: "demo/echo", prompt: { id: "pmpt_1" }, input: "hi" },
      { model: "demo/echo", prompt: { id: "pmpt_1" } },
    ]) {
      const res = await gw().fetch("/v1/responses", { method: "POST", json: body })
      expect({ body, status: res.status }).toEqual({ body, status: 200 })
      await res.text()
    }
  })
})
