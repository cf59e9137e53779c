/**
 * docs/plugins.md says which plugins add no `service_metadata.pipeline` entry when they change
 * nothing (its "no entry when" table); this holds the docs to the code on the demo catalog: each
 * listed plugin that the demo can run leaves no entry for a request it has nothing to do for, and
 * a plugin the docs say always reports (web-fetch) reports even then.
 */
import { describe, expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

/** The plugin ids of the docs' "no entry when" table, in its order. */
const silentWhenUnchanged = (): ReadonlyArray<string> => {
  const lines = readFileSync(join(import.meta.dir, "..", "..", "docs", "plugins.md"), "utf8").split("\n")
  const header = lines.findIndex((l) => /^\|\s*plugin\s*\|\s*no entry when\s*\|/.test(l))
  if (header < 0) return []
  const ids: Array<string> = []
  for (let i = header + 2; i < lines.length && (lines[i] as string).startsWith("|"); i++) {
    const id = /^\|\s*`([a-z-]+)`/.exec(lines[i] as string)?.[1]
    if (id !== undefined) ids.push(id)
  }
  return ids
}

type Entries = ReadonlyArray<{ readonly type: string; readonly name: string }>

const entriesOf = async (path: string, json: Record<string, unknown>): Promise<Entries> => {
  const res = await gw().fetch(path, { method: "POST", json, headers: { "x-service-metadata": "enabled" } })
  expect(res.status).toBe(200)
  const body = (await res.json()) as { service_metadata?: { pipeline?: Entries } }
  return body.service_metadata?.pipeline ?? []
}

/** A request each listed plugin has nothing to do for, on the demo (moderation needs a moderation API: its own tests). */
const NO_OP: Record<string, () => Promise<Entries>> = {
  // "hi" fits demo/echo's 128,000-token context as it is.
  "context-compression": () => entriesOf("/v1/responses", { model: "demo/echo", input: "hi", plugins: [{ id: "context-compression" }] }),
  // The fake answers json_object with valid JSON: nothing to heal.
  "response-healing": () =>
    entriesOf("/v1/chat/completions", {
      model: "demo/echo",
      messages: [{ role: "user", content: "Paris weather as JSON" }],
      response_format: { type: "json_object" },
      plugins: [{ id: "response-healing" }],
    }),
  "file-parser": () => entriesOf("/v1/responses", { model: "demo/echo", input: "no file here", plugins: [{ id: "file-parser" }] }),
}

describe("a plugin that changes nothing adds no pipeline entry (docs/plugins.md)", () => {
  test("the docs list context-compression, response-healing, file-parser and moderation as silent when they change nothing", () => {
    expect(silentWhenUnchanged()).toEqual(["context-compression", "response-healing", "file-parser", "moderation"])
  })

  for (const id of ["context-compression", "response-healing", "file-parser"]) {
    test(`${id}: a request it has nothing to do for gets no entry of it`, async () => {
      expect(silentWhenUnchanged()).toContain(id)
      const entries = await (NO_OP[id] as () => Promise<Entries>)()
      expect(entries.filter((e) => e.name === id)).toEqual([])
    })
  }

  test("web-fetch, not in the list, reports even when the message links no page", async () => {
    expect(silentWhenUnchanged()).not.toContain("web-fetch")
    const entries = await entriesOf("/v1/responses", { model: "demo/echo", input: "no link here", plugins: [{ id: "web-fetch" }] })
    expect(entries.filter((e) => e.name === "web-fetch")).toHaveLength(1)
  })
})
