/** Control-plane bodies are checked like the data plane's: depth cap, `+json` types, the type of an empty body. */
import { describe, expect, test } from "bun:test"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const nested = (levels: number) => `${'{"a":'.repeat(levels)}1${"}".repeat(levels)}`

describe("control-plane JSON bodies", () => {
  test("a body nested 15,000 deep is a 400 naming the 128-level rule, not a 500", async () => {
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: `{"name":${nested(15_000)}}`,
    })
    expect(await expectError(res, 400)).toContain("nests deeper than 128 levels")
  })

  test("the same depth is refused with an inference key too", async () => {
    const made = await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })
    const { key } = (await made.json()) as { key: string }
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: `{"name":${nested(15_000)}}`,
    })
    expect(res.status).toBeLessThan(500)
    await res.text()
  })

  test("a body within the depth cap still reaches the handler", async () => {
    const res = await gw().fetch("/v1/keys", { method: "POST", json: { name: "shallow" } })
    expect(res.status).toBe(201)
    await res.text()
  })

  test("an empty body declared as multipart/form-data is 415, not 500", async () => {
    for (const [method, path] of [["POST", "/v1/keys"], ["GET", "/v1/keys"], ["PATCH", "/v1/workspaces/default"]] as const) {
      const res = await gw().fetch(path, { method, headers: { "content-type": "multipart/form-data; boundary=x" } })
      expect(await expectError(res, 415)).toContain("multipart/form-data")
    }
  })

  test("an empty body without a content type is served as before", async () => {
    const res = await gw().fetch("/v1/keys")
    expect(res.status).toBe(200)
    await res.text()
  })

  test("application/*+json bodies are parsed on the control plane as on the data plane", async () => {
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      headers: { "content-type": "application/vnd.api+json; charset=utf-8" },
      body: JSON.stringify({ name: "plus-json" }),
    })
    expect(res.status).toBe(201)
    expect(((await res.json()) as { data: { name: string } }).data.name).toBe("plus-json")
  })

  test("malformed JSON is still a 400 naming JSON", async () => {
    const res = await gw().fetch("/v1/keys", { method: "POST", headers: { "content-type": "application/json" }, body: "{nope" })
    expect(await expectError(res, 400)).toContain("JSON")
  })
})
