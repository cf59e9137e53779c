/** A config file with a key the gateway does not know is refused (a misspelt key started as if it were absent). */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parseConfigFile } from "../../src/config/Config.js"

const provider = { id: "p", kind: "fake" }
const endpoint = { provider: "p", upstream_model: "m", pricing: { prompt: 1, completion: 1 } }
const model = { id: "a/b", context_length: 10, endpoints: [endpoint] }
const base = { providers: [provider], models: [model] }

const refusal = (file: unknown) => {
  const parsed = parseConfigFile("conf.json", JSON.stringify(file))
  return Either.isLeft(parsed) ? parsed.left.message : undefined
}

describe("unknown keys in the config file", () => {
  const cases: Array<[string, unknown, string]> = [
    ["top level", { ...base, servr: { max_body_bytes: 1 } }, "servr"],
    ["a provider", { ...base, providers: [{ ...provider, bse_url: "http://x" }] }, "providers[0].bse_url"],
    ["a model", { ...base, models: [{ ...model, contxt: 5 }] }, "models[0].contxt"],
    ["an endpoint", { ...base, models: [{ ...model, endpoints: [{ ...endpoint, zdr_: true }] }] }, "models[0].endpoints[0].zdr_"],
    ["pricing", { ...base, models: [{ ...model, endpoints: [{ ...endpoint, pricing: { prompt: 1, completion: 1, promt: 2 } }] }] }, "models[0].endpoints[0].pricing.promt"],
    ["server", { ...base, server: { max_body_byte: 5 } }, "server.max_body_byte"],
    ["credits", { ...base, credits: { enforce: true, enforced: true } }, "credits.enforced"],
    ["a guardrail", { ...base, guardrails: [{ id: "g", name: "n", patterns: ["x"], workspaces: [] }] }, "guardrails[0].workspaces"],
  ]
  for (const [where, file, path] of cases) {
    test(`are refused with the file, the path and "unknown key": ${where}`, () => {
      expect(refusal(file)).toBe(`conf.json: ${path}: unknown key`)
    })
  }

  test("known keys at every level load, header names included (a record, not a struct)", () => {
    const full = {
      providers: [{ ...provider, headers: { "x-any-header": "v" }, byok: false, timeout_ms: 5 }],
      models: [{ ...model, name: "n", endpoints: [{ ...endpoint, supports: ["tools"], zdr: true, data_collection: "deny" }] }],
      credits: { enforce: false },
      guardrails: [{ id: "g", name: "n", patterns: ["x"], workspace_ids: [] }],
      server: { max_body_bytes: 10, request_timeout_ms: 10 },
    }
    expect(refusal(full)).toBeUndefined()
  })

  test("config/demo.json loads", async () => {
    expect(refusal(await Bun.file(`${import.meta.dir}/../../config/demo.json`).json())).toBeUndefined()
  })
})
