/**
 * PATCH bodies take only the fields the operation can change: a misspelt field (`limt`) or one
 * that cannot be changed there (a key's `expires_at`, a destination's `workspace_id`, a
 * workspace's `created_by`) is a 400 naming it, and nothing changes. They used to answer 200 and
 * change nothing, which looked like success.
 */
import { describe, expect, test } from "bun:test"
import { expectError, useGateway } from "../support/gateway.js"

const gw = useGateway()

const patch = (path: string, json: unknown) => gw().fetch(path, { method: "PATCH", json })
const read = async (path: string) => ((await (await gw().fetch(path)).json()) as { data: Record<string, unknown> }).data

describe("PATCH with a field it cannot change", () => {
  test("a key: 400 naming the field, the key as it was; its own fields still change", async () => {
    const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "patched", limit: 2 } })).json()) as { data: { hash: string } }
    const path = `/v1/keys/${made.data.hash}`
    const before = await read(path)
    expect(await expectError(await patch(path, { limt: 5 }), 400)).toContain("limt")
    expect(await expectError(await patch(path, { name: "renamed", expires_at: "2099-01-01T00:00:00Z" }), 400)).toContain("expires_at")
    expect(await read(path)).toEqual(before)
    expect((await patch(path, { name: "renamed", limit: 3 })).status).toBe(200)
    expect(await read(path)).toMatchObject({ name: "renamed", limit: 3 })
  })

  test("a workspace: 400 naming the field, the workspace as it was", async () => {
    const made = (await (await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "Patched", slug: `patched-${crypto.randomUUID().slice(0, 8)}` } })).json()) as {
      data: { id: string }
    }
    const path = `/v1/workspaces/${made.data.id}`
    const before = await read(path)
    expect(await expectError(await patch(path, { name: "Other", created_by: "user_else" }), 400)).toContain("created_by")
    expect(await read(path)).toEqual(before)
  })

  test("a destination: 400 naming the field, the destination where it was", async () => {
    const made = await gw().fetch("/v1/observability/destinations", {
      method: "POST",
      json: { name: "dest", type: "webhook", config: { url: "https://hooks.example.com/in" } },
    })
    expect(made.status).toBe(201)
    const id = ((await made.json()) as { data: { id: string } }).data.id
    const path = `/v1/observability/destinations/${id}`
    const before = await read(path)
    expect(await expectError(await patch(path, { workspace_id: crypto.randomUUID() }), 400)).toContain("workspace_id")
    expect(await read(path)).toEqual(before)
  })
})
