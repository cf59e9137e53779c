/**
 * Model ids stored for later use (a workspace's default_text_model, a preset's model and models)
 * must be catalog models: refused at write (400 naming the field), and, since the catalog can
 * change on a restart, checked on use (400 naming the preset or the workspace setting and the model).
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { demoCatalogWith } from "../support/catalog.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { expectError, startTestGateway } from "../support/gateway.js"

let db: TestDatabase
/** The gateway as restarted without `gone/model` in its catalog. */
let after: RunningServer
let adminKey: string
/** A key whose workspace's default_text_model is `gone/model`. */
let defaultKey: string

const call = (path: string, init: { method?: string; json?: unknown; key?: string } = {}) =>
  fetch(`${after.url}${path}`, {
    method: init.method ?? "GET",
    headers: { authorization: `Bearer ${init.key ?? adminKey}`, "content-type": "application/json" },
    body: init.json === undefined ? undefined : JSON.stringify(init.json),
  })

beforeAll(async () => {
  db = await freshDatabase()
  // Before the restart the catalog has gone/model: the preset and the workspace setting are saved.
  const before = await startTestGateway({ databaseUrl: db.url, catalog: demoCatalogWith(["gone/model"]) })
  adminKey = before.adminKey
  const saved = [
    await before.fetch("/v1/presets/uses-gone/responses", { method: "POST", json: { model: "gone/model" } }),
    await before.fetch("/v1/presets/falls-back-to-gone/responses", { method: "POST", json: { model: "demo/echo", models: ["gone/model"] } }),
    await before.fetch("/v1/workspaces", { method: "POST", json: { name: "Gone", slug: "gone", default_text_model: "gone/model" } }),
  ]
  expect(saved.map((r) => r.status)).toEqual([200, 200, 201])
  const ws = ((await saved[2]!.json()) as { data: { id: string } }).data.id
  const key = await before.fetch("/v1/keys", { method: "POST", json: { name: "in gone", workspace_id: ws } })
  defaultKey = ((await key.json()) as { key: string }).key
  await before.server.stop()
  after = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url })))
})

afterAll(async () => {
  await after?.stop()
  await db?.drop()
})

describe("at write: a model the catalog does not have is refused, naming the field", () => {
  test("workspace create and update: default_text_model", async () => {
    const made = await call("/v1/workspaces", { method: "POST", json: { name: "W", slug: "w-bad", default_text_model: "nope/model" } })
    const message = await expectError(made, 400)
    expect(message).toContain("default_text_model")
    expect(message).toContain('"nope/model"')
    const patched = await call("/v1/workspaces/default", { method: "PATCH", json: { default_text_model: "nope/model" } })
    expect(await expectError(patched, 400)).toContain("default_text_model")
  })

  test("workspace: a catalog model (with a routing suffix too) and null are accepted", async () => {
    for (const model of ["demo/echo", "demo/echo:nitro", null]) {
      const res = await call("/v1/workspaces/default", { method: "PATCH", json: { default_text_model: model } })
      expect({ model, status: res.status }).toEqual({ model, status: 200 })
      await res.text()
    }
  })

  test("preset version: model and models[i]", async () => {
    const model = await call("/v1/presets/bad-model/responses", { method: "POST", json: { model: "nope/model" } })
    const message = await expectError(model, 400)
    expect(message).toContain("model")
    expect(message).toContain('"nope/model"')
    const models = await call("/v1/presets/bad-models/responses", { method: "POST", json: { model: "demo/echo", models: ["demo/free", "nope/other"] } })
    expect(await expectError(models, 400)).toContain("models[1]")
    // Nothing was created.
    expect((await call("/v1/presets/bad-model")).status).toBe(404)
  })

  test("preset version: catalog models are accepted", async () => {
    const res = await call("/v1/presets/good/responses", { method: "POST", json: { model: "demo/echo", models: ["demo/free"] } })
    expect(res.status).toBe(200)
    await res.text()
  })
})

describe("on use, after the catalog lost the model: a 400 naming where it was saved and the model", () => {
  test("the workspace's default_text_model", async () => {
    const res = await call("/v1/responses", { method: "POST", key: defaultKey, json: { input: "hi" } })
    const message = await expectError(res, 400)
    expect(message).toContain("default_text_model")
    expect(message).toContain('"gone/model"')
    // A request that names its own model is not affected.
    const own = await call("/v1/responses", { method: "POST", key: defaultKey, json: { model: "demo/echo", input: "hi" } })
    expect(own.status).toBe(200)
    await own.text()
  })

  test("a preset's model, named as @preset/slug or by the preset field", async () => {
    for (const body of [{ model: "@preset/uses-gone", input: "hi" }, { preset: "uses-gone", input: "hi" }]) {
      const message = await expectError(await call("/v1/responses", { method: "POST", json: body }), 400)
      expect(message).toContain('preset "uses-gone"')
      expect(message).toContain('"gone/model"')
    }
  })

  test("a preset's models", async () => {
    const res = await call("/v1/responses", { method: "POST", json: { model: "@preset/falls-back-to-gone", input: "hi" } })
    const message = await expectError(res, 400)
    expect(message).toContain('preset "falls-back-to-gone"')
    expect(message).toContain("models[0]")
  })

  test("a model the caller names is still a 404 of its own", async () => {
    const res = await call("/v1/responses", { method: "POST", json: { model: "gone/model", preset: "uses-gone", input: "hi" } })
    expect(await expectError(res, 404)).toContain("gone/model")
  })
})
