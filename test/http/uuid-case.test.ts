/**
 * Ids are UUIDs, which are case-insensitive: a workspace or a destination named by its id in
 * upper case is found (it was a 404), and its answer carries the id as the gateway stores it.
 */
import { expect, test } from "bun:test"
import { useGateway } from "../support/gateway.js"

const gw = useGateway()

test("a workspace and a destination by an upper-case id are found; a slug keeps its case rules", async () => {
  const ws = (await (await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "Cased", slug: "cased-ids" } })).json()) as { data: { id: string } }
  const upper = await gw().fetch(`/v1/workspaces/${ws.data.id.toUpperCase()}`)
  expect(upper.status).toBe(200)
  expect(((await upper.json()) as { data: { id: string } }).data.id).toBe(ws.data.id)
  expect((await gw().fetch("/v1/workspaces/CASED-IDS")).status).toBe(404)

  const made = await gw().fetch("/v1/observability/destinations", { method: "POST", json: { name: "d", type: "webhook", config: { url: "https://hooks.example.com/in" } } })
  const id = ((await made.json()) as { data: { id: string } }).data.id
  const dest = await gw().fetch(`/v1/observability/destinations/${id.toUpperCase()}`)
  expect(dest.status).toBe(200)
  expect(((await dest.json()) as { data: { id: string } }).data.id).toBe(id)
  expect((await gw().fetch(`/v1/observability/destinations/${id.toUpperCase()}`, { method: "PATCH", json: { name: "renamed" } })).status).toBe(200)
})
