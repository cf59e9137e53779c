/**
 * Content (input messages, completion, reasoning) is stored when the workspace's
 * is_observability_io_logging_enabled is on, sampled by io_logging_sampling_rate and
 * restricted to io_logging_api_key_ids when set; GET /generation/content then returns it.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { ContentPolicy } from "../../src/services/ContentPolicy.js"
import { expectError, useGateway } from "../support/gateway.js"

const gw = useGateway()

const workspaceOf = async () =>
  ((await (await gw().fetch("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id

/** Sets the logging columns of the admin's workspace and drops the cached settings. */
const setLogging = async (enabled: boolean, rate: number, keyIds: Array<number> | null) => {
  const workspaceId = await workspaceOf()
  await gw().server.runtime.runPromise(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      yield* sql`UPDATE workspaces SET is_observability_io_logging_enabled = ${enabled ? 1 : 0},
        io_logging_sampling_rate = ${rate}, io_logging_api_key_ids = ${keyIds === null ? null : JSON.stringify(keyIds)}
        WHERE id = ${workspaceId}`
      yield* Effect.flatMap(ContentPolicy, (p) => p.invalidate(workspaceId))
    }),
  )
}

const ask = async (input: string, key?: string) => {
  const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input, instructions: "Sys." }, key })
  expect(res.status).toBe(200)
  return res.headers.get("x-generation-id")!
}

const flush = () => gw().server.drain()

const content = async (id: string) => {
  await flush()
  return gw().fetch(`/v1/generation/content?id=${id}`)
}

describe("content logging", () => {
  test("off (the default): nothing is stored and content is 404", async () => {
    const id = await ask("secret stuff")
    expect(await expectError(await content(id), 404)).toContain("not stored")
  })

  test("on: input messages and completion are stored and returned", async () => {
    await setLogging(true, 1, null)
    const id = await ask("remember me [reasoning]")
    const res = await content(id)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: { input: unknown; output: Record<string, unknown>; error: unknown } }
    expect(body.data.input).toEqual({
      messages: [
        { role: "system", content: "Sys." },
        { role: "user", content: "remember me [reasoning]" },
      ],
    })
    expect(body.data.output.completion).toBe("Echo: remember me [reasoning]")
    expect(typeof body.data.output.reasoning).toBe("string")
    expect(body.data.error).toBeNull()
  })

  test("sampled: about the sampling rate of requests are stored", async () => {
    await setLogging(true, 0.5, null)
    const ids = await Promise.all(Array.from({ length: 120 }, (_, i) => ask(`sample ${i}`)))
    await flush()
    let stored = 0
    for (const id of ids) if ((await gw().fetch(`/v1/generation/content?id=${id}`)).status === 200) stored++
    // Binomial(120, 0.5): outside [25, 95] has probability < 1e-10.
    expect(stored).toBeGreaterThan(25)
    expect(stored).toBeLessThan(95)
  })

  test("restricted to io_logging_api_key_ids: only those keys' requests are stored", async () => {
    const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "logged" } })).json()) as {
      key: string
      data: { id: number }
    }
    await setLogging(true, 1, [made.data.id])
    const logged = await ask("from the listed key", made.key)
    const unlogged = await ask("from the admin key")
    expect((await content(logged)).status).toBe(200)
    await expectError(await content(unlogged), 404)
  })

  test("a workspace PATCH turning logging on applies to the very next request", async () => {
    await setLogging(false, 1, null)
    const workspaceId = await workspaceOf()
    const off = await ask("before the switch")
    await expectError(await content(off), 404)
    const patched = await gw().fetch(`/v1/workspaces/${workspaceId}`, {
      method: "PATCH",
      json: { is_observability_io_logging_enabled: true, io_logging_sampling_rate: 1, io_logging_api_key_ids: null },
    })
    expect(patched.status).toBe(200)
    const on = await ask("after the switch")
    expect((await content(on)).status).toBe(200)
  })
})
