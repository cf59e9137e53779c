import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { demoCatalogWith } from "../support/catalog.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"
import { expectShape } from "../support/shapes.js"

// default_text_model names catalog models only (refused at write otherwise).
const gw = useInProcessGateway({ catalog: demoCatalogWith(["openai/gpt-4o", "anthropic/claude", "m"]) })

/** Wire-compat's required keys of a workspace (plus the ones this gateway promises). */
const WORKSPACE = {
  id: ["string"],
  name: ["string"],
  slug: ["string"],
  description: ["string"],
  default_text_model: ["string", "null"],
  default_image_model: ["string", "null"],
  default_provider_sort: ["string", "null"],
  io_logging_api_key_ids: ["array", "null"],
  io_logging_sampling_rate: ["number"],
  is_data_discount_logging_enabled: ["boolean"],
  is_observability_broadcast_enabled: ["boolean"],
  is_observability_io_logging_enabled: ["boolean"],
  created_at: ["zoned"],
  created_by: ["string"],
  updated_at: ["zoned", "null"],
  default_guardrail_id: ["string"],
  disabled_server_tools: ["array", "null"],
} as const

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

type Ws = Record<string, unknown> & { id: string; slug: string; name: string; updated_at: string | null }

let counter = 0
const uniqueSlug = (prefix = "ws") => `${prefix}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const createWs = async (json: Record<string, unknown> = {}, key?: string): Promise<Ws> => {
  const res = await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "Team", slug: uniqueSlug(), ...json }, key })
  const body = (await res.json()) as { data: Ws }
  if (res.status !== 201) throw new Error(`expected 201, got ${res.status}: ${JSON.stringify(body)}`)
  return body.data
}

const getWs = async (ref: string, key?: string) => {
  const res = await gw().fetch(`/v1/workspaces/${ref}`, { key })
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Ws }).data
}

const listWs = async (key?: string, query = "") => {
  const res = await gw().fetch(`/v1/workspaces${query}`, { key })
  expect(res.status).toBe(200)
  return (await res.json()) as { data: Array<Ws>; total_count: number }
}

const me = async () =>
  ((await (await gw().fetch("/v1/key")).json()) as { data: { creator_user_id: string; workspace_id: string } }).data

/** A second user with its own management key (and default workspace). */
const otherUser = async (userId: string) =>
  gw().server.runtime.runPromise(
    Effect.gen(function* () {
      const workspaceId = yield* (yield* Users).ensure(userId)
      const { row, secret } = yield* (yield* KeyStore).create({ userId, workspaceId, name: "admin", isManagement: true })
      return { userId, workspaceId, secret, keyId: Number(row.id) }
    }),
  )

/** A key of `userId` placed in `workspaceId` directly through the store. */
const keyIn = (userId: string, workspaceId: string, name = "in-ws") =>
  gw().server.runtime.runPromise(
    Effect.map(
      Effect.flatMap(KeyStore, (keys) => keys.create({ userId, workspaceId, name })),
      ({ row }) => row,
    ),
  )

const inferenceKey = async () => {
  const res = await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })
  return ((await res.json()) as { key: string }).key
}

const createRefused = async (json: Record<string, unknown>, field: string) => {
  const res = await gw().fetch("/v1/workspaces", { method: "POST", json })
  const message = await expectError(res, 400)
  expect(message).toContain(field)
  return message
}

describe("POST /workspaces (create)", () => {
  test("answers 201 {data: workspace} with every field of the contract, as sent", async () => {
    const key = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "logged" } })).json()) as {
      data: { id: number }
    }
    const slug = uniqueSlug("prod")
    const sent = {
      name: "Production",
      slug,
      description: "Production environment",
      default_text_model: "openai/gpt-4o",
      default_image_model: "openai/dall-e-3",
      default_provider_sort: "throughput",
      io_logging_api_key_ids: [key.data.id],
      io_logging_sampling_rate: 0.25,
      is_data_discount_logging_enabled: true,
      is_observability_broadcast_enabled: true,
      is_observability_io_logging_enabled: true,
      disabled_server_tools: ["web_search"],
    }
    const res = await gw().fetch("/v1/workspaces", { method: "POST", json: sent })
    expect(res.status).toBe(201)
    const { data } = (await res.json()) as { data: Ws }
    expectShape(data, WORKSPACE)
    expect(data.id).toMatch(UUID)
    expect(data).toMatchObject({
      ...sent,
      created_by: (await me()).creator_user_id,
      updated_at: null,
      default_guardrail_id: `gr_${data.id}`,
    })
    expect(await getWs(data.id)).toEqual(data)
  })

  test("name and slug alone are enough; the rest takes its default", async () => {
    const data = await createWs({ name: "Bare" })
    expectShape(data, WORKSPACE)
    expect(data).toMatchObject({
      description: "",
      default_text_model: null,
      default_image_model: null,
      default_provider_sort: null,
      io_logging_api_key_ids: null,
      io_logging_sampling_rate: 1,
      is_data_discount_logging_enabled: false,
      is_observability_broadcast_enabled: false,
      is_observability_io_logging_enabled: false,
      disabled_server_tools: null,
      updated_at: null,
    })
  })

  test("nullable fields accept null", async () => {
    const data = await createWs({
      description: null,
      default_text_model: null,
      default_image_model: null,
      default_provider_sort: null,
      io_logging_api_key_ids: null,
      disabled_server_tools: null,
    })
    expect(data).toMatchObject({ description: "", default_provider_sort: null, io_logging_api_key_ids: null, disabled_server_tools: null })
  })

  test("the creator becomes an admin member", async () => {
    const data = await createWs()
    const members = (await (await gw().fetch(`/v1/workspaces/${data.id}/members`)).json()) as {
      data: Array<{ user_id: string; role: string }>
    }
    expect(members.data).toEqual([expect.objectContaining({ user_id: (await me()).creator_user_id, role: "admin" })])
  })

  test("name of 100 characters is accepted, 101 refused naming name; empty and missing name refused", async () => {
    expect((await createWs({ name: "n".repeat(100) })).name).toBe("n".repeat(100))
    await createRefused({ name: "n".repeat(101), slug: uniqueSlug() }, "name")
    await createRefused({ name: "", slug: uniqueSlug() }, "name")
    expect(await createRefused({ slug: uniqueSlug() }, "name")).toContain("is missing")
  })

  test("characters are code points: a name of 100 emoji and a description of 500 are accepted, one more refused", async () => {
    expect((await createWs({ name: "🚀".repeat(100), description: "🚀".repeat(500) })).name).toBe("🚀".repeat(100))
    await createRefused({ name: "🚀".repeat(101), slug: uniqueSlug() }, "name")
    await createRefused({ name: "x", slug: uniqueSlug(), description: "🚀".repeat(501) }, "description")
  })

  test("slug of 50 characters is accepted, 51 refused naming slug; empty and missing slug refused", async () => {
    const fifty = `s${Date.now()}`.padEnd(50, "x")
    expect((await createWs({ slug: fifty })).slug).toBe(fifty)
    await createRefused({ name: "x", slug: `${fifty}y`.slice(0, 51).padEnd(51, "y") }, "slug")
    await createRefused({ name: "x", slug: "" }, "slug")
    expect(await createRefused({ name: "x" }, "slug")).toContain("is missing")
  })

  test("a slug shaped as a workspace id (a UUID) is refused: a path naming it would find the workspace of that id first", async () => {
    const message = await createRefused({ name: "x", slug: crypto.randomUUID() }, "slug")
    expect(message).toContain("must not have the shape of a workspace id")
  })

  test("slug pattern: a-b and a1-b2-c3 are accepted; A, a--b, -a, a-, a_b and 'a b' are refused naming slug", async () => {
    const suffix = Math.random().toString(36).slice(2, 8)
    expect((await createWs({ slug: `a-b${suffix}` })).slug).toBe(`a-b${suffix}`)
    expect((await createWs({ slug: `a1-b2-c3${suffix}` })).slug).toBe(`a1-b2-c3${suffix}`)
    for (const slug of ["A", "a--b", "-a", "a-", "a_b", "a b", "Ab-c"]) {
      const message = await createRefused({ name: "x", slug }, "slug")
      expect(message).toContain("hyphens")
    }
  })

  test("description of 500 characters is accepted, 501 refused naming description", async () => {
    expect((await createWs({ description: "d".repeat(500) })).description).toBe("d".repeat(500))
    await createRefused({ name: "x", slug: uniqueSlug(), description: "d".repeat(501) }, "description")
  })

  test("io_logging_sampling_rate 0.0001 and 1 are accepted; 0.00009, 1.0001, 0 and a string are refused", async () => {
    expect((await createWs({ io_logging_sampling_rate: 0.0001 })).io_logging_sampling_rate).toBe(0.0001)
    expect((await createWs({ io_logging_sampling_rate: 1 })).io_logging_sampling_rate).toBe(1)
    for (const rate of [0.00009, 1.0001, 0, "0.5"]) {
      await createRefused({ name: "x", slug: uniqueSlug(), io_logging_sampling_rate: rate }, "io_logging_sampling_rate")
    }
  })

  test("default_provider_sort accepts price, throughput, latency and exacto; anything else is refused naming it", async () => {
    for (const sort of ["price", "throughput", "latency", "exacto"]) {
      expect((await createWs({ default_provider_sort: sort })).default_provider_sort).toBe(sort)
    }
    const message = await createRefused({ name: "x", slug: uniqueSlug(), default_provider_sort: "cheapest" }, "default_provider_sort")
    expect(message).toContain("price, throughput, latency, exacto")
  })

  test("io_logging_api_key_ids must be integer ids of the caller's keys", async () => {
    const other = await otherUser("user_ws_keyids")
    const mine = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "mine" } })).json()) as {
      data: { id: number }
    }
    expect((await createWs({ io_logging_api_key_ids: [mine.data.id] })).io_logging_api_key_ids).toEqual([mine.data.id])
    expect((await createWs({ io_logging_api_key_ids: [] })).io_logging_api_key_ids).toEqual([])
    const unknown = await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: [999999] }, "io_logging_api_key_ids")
    expect(unknown).toContain("999999")
    // Another user's key id exists, but is not the caller's.
    await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: [other.keyId] }, "io_logging_api_key_ids")
    await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: [1.5] }, "io_logging_api_key_ids")
    await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: ["1"] }, "io_logging_api_key_ids")
    await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: 1 }, "io_logging_api_key_ids")
    // Ids no key can have are refused by the schema, never passed to the store (no 5xx).
    for (const id of [0, -1, 1e20]) {
      await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: [id] }, "io_logging_api_key_ids")
    }
    const many = Array.from({ length: 1001 }, (_, i) => i + 1)
    expect(await createRefused({ name: "x", slug: uniqueSlug(), io_logging_api_key_ids: many }, "io_logging_api_key_ids")).toContain(
      "at most 1000",
    )
  })

  test("booleans must be booleans; disabled_server_tools must be strings", async () => {
    for (const field of [
      "is_data_discount_logging_enabled",
      "is_observability_broadcast_enabled",
      "is_observability_io_logging_enabled",
    ]) {
      await createRefused({ name: "x", slug: uniqueSlug(), [field]: "yes" }, field)
    }
    await createRefused({ name: "x", slug: uniqueSlug(), disabled_server_tools: [1] }, "disabled_server_tools")
    await createRefused({ name: "x", slug: uniqueSlug(), disabled_server_tools: "web_search" }, "disabled_server_tools")
  })

  test("disabled_server_tools names server tools: a typo is a 400 naming its index, on create and on update, and changes nothing", async () => {
    const message = await createRefused({ name: "x", slug: uniqueSlug(), disabled_server_tools: ["web_search", "web_serch"] }, "disabled_server_tools[1]")
    expect(message).toContain('"web_serch" is not a server tool')
    await createRefused({ name: "x", slug: uniqueSlug(), disabled_server_tools: ["nobody:web_search"] }, "disabled_server_tools[0]")
    const made = await createWs({ disabled_server_tools: ["openrouter:web_fetch", "service:datetime", "web_search_preview", "image_generation"] })
    expect(made.disabled_server_tools).toEqual(["openrouter:web_fetch", "service:datetime", "web_search_preview", "image_generation"])
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "PATCH", json: { disabled_server_tools: ["fusion", "datetme"] } })
    expect(await expectError(res, 400)).toContain("disabled_server_tools[1]")
    expect((await getWs(made.id)).disabled_server_tools).toEqual(made.disabled_server_tools)
  })

  test("a slug the user already uses is a 400 naming slug (not 409); another user may use it", async () => {
    const taken = await createWs()
    const message = await createRefused({ name: "again", slug: taken.slug }, "slug")
    expect(message).toContain("already used")
    // Every user has a default workspace with the slug "default".
    await createRefused({ name: "again", slug: "default" }, "slug")
    const other = await otherUser("user_ws_sameslug")
    const theirs = await createWs({ slug: taken.slug }, other.secret)
    expect(theirs.slug).toBe(taken.slug)
    expect(theirs.id).not.toBe(taken.id)
  })

  test("a refused create changes nothing", async () => {
    const before = await listWs()
    const slug = uniqueSlug()
    await createRefused({ name: "n".repeat(101), slug }, "name")
    await createRefused({ name: "x", slug, io_logging_api_key_ids: [999999] }, "io_logging_api_key_ids")
    const after = await listWs()
    expect(after.total_count).toBe(before.total_count)
    expect(after.data.some((w) => w.slug === slug)).toBe(false)
    // The slug is still free.
    expect((await createWs({ slug })).slug).toBe(slug)
  })

  test("malformed JSON and a non-object body are 400", async () => {
    await expectError(
      await gw().fetch("/v1/workspaces", { method: "POST", body: "{", headers: { "content-type": "application/json" } }),
      400,
    )
    await expectError(await gw().fetch("/v1/workspaces", { method: "POST", json: [1] }), 400)
  })

  test("no credential is 401; an inference key is 403 with the management message", async () => {
    await expectError(await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "x", slug: "x" }, key: null }), 401)
    const key = await inferenceKey()
    const message = await expectError(
      await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "x", slug: uniqueSlug() }, key }),
      403,
    )
    expect(message).toBe("Only management keys can perform this operation")
  })
})

describe("GET /workspaces (list)", () => {
  test("answers {data: [workspace], total_count} with the caller's default workspace and the ones it created", async () => {
    const made = await createWs()
    const body = await listWs()
    for (const w of body.data) expectShape(w, WORKSPACE)
    expect(Number.isInteger(body.total_count)).toBe(true)
    expect(body.total_count).toBe(body.data.length)
    const ids = body.data.map((w) => w.id)
    const { workspace_id } = await me()
    expect(ids).toContain(made.id)
    expect(ids).toContain(workspace_id)
    expect(body.data.find((w) => w.id === workspace_id)?.is_default).toBe(true)
  })

  test("offset and limit page through the list; total_count stays the total", async () => {
    await createWs()
    await createWs()
    const all = await listWs()
    const page = await listWs(undefined, "?offset=1&limit=2")
    expect(page.data.map((w) => w.id)).toEqual(all.data.slice(1, 3).map((w) => w.id))
    expect(page.total_count).toBe(all.total_count)
  })

  test("limit 0 and 101 and a negative offset are 400 naming the parameter", async () => {
    expect(await expectError(await gw().fetch("/v1/workspaces?limit=0"), 400)).toContain("limit")
    expect(await expectError(await gw().fetch("/v1/workspaces?limit=101"), 400)).toContain("limit")
    expect(await expectError(await gw().fetch("/v1/workspaces?offset=-1"), 400)).toContain("offset")
    expect(await expectError(await gw().fetch("/v1/workspaces?offset=99999999999999999999"), 400)).toContain("offset")
    expect(((await listWs(undefined, "?offset=100000")) as { data: Array<unknown> }).data).toEqual([])
    expect((await gw().fetch("/v1/workspaces?limit=100")).status).toBe(200)
  })

  test("shows workspaces the caller is a member of, never another user's others", async () => {
    const other = await otherUser("user_ws_list")
    const shared = await createWs({ name: "Shared" }, other.secret)
    const privateOne = await createWs({ name: "Private" }, other.secret)
    const before = (await listWs()).data.map((w) => w.id)
    expect(before).not.toContain(shared.id)
    expect(before).not.toContain(privateOne.id)
    const add = await gw().fetch(`/v1/workspaces/${shared.id}/members/add`, {
      method: "POST",
      json: { user_ids: [(await me()).creator_user_id] },
      key: other.secret,
    })
    expect(add.status).toBe(200)
    const after = (await listWs()).data.map((w) => w.id)
    expect(after).toContain(shared.id)
    expect(after).not.toContain(privateOne.id)
    expect(after).not.toContain(other.workspaceId)
  })

  test("an inference key is 403; no key is 401", async () => {
    await expectError(await gw().fetch("/v1/workspaces", { key: await inferenceKey() }), 403)
    await expectError(await gw().fetch("/v1/workspaces", { key: null }), 401)
  })
})

describe("GET /workspaces/{id or slug}", () => {
  test("answers {data: workspace} by id and by slug", async () => {
    const made = await createWs({ description: "by either" })
    const byId = await getWs(made.id)
    expectShape(byId, WORKSPACE)
    expect(byId).toEqual(made)
    expect(await getWs(made.slug)).toEqual(made)
  })

  test("'default' is the caller's own default workspace", async () => {
    const ws = await getWs("default")
    expect(ws.id).toBe((await me()).workspace_id)
  })

  test("an unknown id or slug is 404", async () => {
    await expectError(await gw().fetch("/v1/workspaces/00000000-0000-4000-8000-000000000000"), 404)
    await expectError(await gw().fetch("/v1/workspaces/no-such-slug"), 404)
  })

  test("no credential is 401; an inference key is 403", async () => {
    const made = await createWs()
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { key: null }), 401)
    expect(await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { key: await inferenceKey() }), 403)).toBe(
      "Only management keys can perform this operation",
    )
  })
})

describe("PATCH /workspaces/{id or slug}", () => {
  test("updates every field and answers {data: workspace} with a zoned updated_at", async () => {
    const made = await createWs()
    const key = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "patch-log" } })).json()) as {
      data: { id: number }
    }
    const slug = uniqueSlug("renamed")
    const sent = {
      name: "Renamed",
      slug,
      description: "now described",
      default_text_model: "anthropic/claude",
      default_image_model: "img/model",
      default_provider_sort: "latency",
      io_logging_api_key_ids: [key.data.id],
      io_logging_sampling_rate: 0.5,
      is_data_discount_logging_enabled: true,
      is_observability_broadcast_enabled: true,
      is_observability_io_logging_enabled: true,
      disabled_server_tools: ["web_fetch"],
    }
    const res = await gw().fetch(`/v1/workspaces/${made.slug}`, { method: "PATCH", json: sent })
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as { data: Ws }
    expectShape(data, WORKSPACE)
    expect(data).toMatchObject({ ...sent, id: made.id, created_at: made.created_at })
    expect(data.updated_at).not.toBeNull()
    expect(Date.parse(data.updated_at as string)).toBeGreaterThanOrEqual(Date.parse(made.created_at as string))
    expect(await getWs(slug)).toEqual(data)
    await expectError(await gw().fetch(`/v1/workspaces/${made.slug}`), 404)
  })

  test("null clears the nullable fields", async () => {
    const made = await createWs({ description: "x", default_text_model: "m", default_provider_sort: "price", io_logging_api_key_ids: [], disabled_server_tools: ["bash"] })
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, {
      method: "PATCH",
      json: { description: null, default_text_model: null, default_provider_sort: null, io_logging_api_key_ids: null, disabled_server_tools: null },
    })
    const { data } = (await res.json()) as { data: Ws }
    expect(data).toMatchObject({ description: "", default_text_model: null, default_provider_sort: null, io_logging_api_key_ids: null, disabled_server_tools: null })
  })

  test("an empty body changes nothing (updated_at stays null)", async () => {
    const made = await createWs({ description: "same" })
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "PATCH", json: {} })
    expect(res.status).toBe(200)
    expect(((await res.json()) as { data: Ws }).data).toEqual(made)
  })

  test("bad fields are 400 naming the field and change nothing", async () => {
    const made = await createWs({ description: "keep" })
    const other = await createWs()
    for (const [json, field] of [
      [{ name: "n".repeat(101) }, "name"],
      [{ name: "" }, "name"],
      [{ slug: "s".repeat(51) }, "slug"],
      [{ slug: "Bad" }, "slug"],
      [{ slug: other.slug }, "slug"],
      [{ description: "d".repeat(501) }, "description"],
      [{ io_logging_sampling_rate: 1.0001 }, "io_logging_sampling_rate"],
      [{ default_provider_sort: "fastest" }, "default_provider_sort"],
      [{ io_logging_api_key_ids: [999999] }, "io_logging_api_key_ids"],
      [{ is_observability_broadcast_enabled: 1 }, "is_observability_broadcast_enabled"],
      [{ name: "valid", slug: other.slug }, "slug"],
    ] as const) {
      const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "PATCH", json })
      expect(await expectError(res, 400)).toContain(field)
    }
    expect(await getWs(made.id)).toEqual(made)
  })

  test("keeping its own slug is fine", async () => {
    const made = await createWs()
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "PATCH", json: { slug: made.slug, name: "Same slug" } })
    expect(res.status).toBe(200)
    expect(((await res.json()) as { data: Ws }).data).toMatchObject({ slug: made.slug, name: "Same slug" })
  })

  test("an unknown workspace is 404; an inference key is 403", async () => {
    await expectError(await gw().fetch(`/v1/workspaces/no-such`, { method: "PATCH", json: { name: "x" } }), 404)
    const made = await createWs()
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "PATCH", json: { name: "x" }, key: await inferenceKey() }), 403)
    expect((await getWs(made.id)).name).toBe("Team")
  })
})

describe("DELETE /workspaces/{id or slug}", () => {
  test("answers {deleted: true}; the workspace is gone and its slug is free again", async () => {
    const made = await createWs()
    const res = await gw().fetch(`/v1/workspaces/${made.slug}`, { method: "DELETE" })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ deleted: true })
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`), 404)
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}/members`), 404)
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" }), 404)
    expect((await listWs()).data.map((w) => w.id)).not.toContain(made.id)
    expect((await createWs({ slug: made.slug })).slug).toBe(made.slug)
  })

  test("the default workspace cannot be deleted: 400 saying why, and it stays", async () => {
    const { workspace_id } = await me()
    const message = await expectError(await gw().fetch(`/v1/workspaces/${workspace_id}`, { method: "DELETE" }), 400)
    expect(message).toContain("default workspace")
    expect(message).toContain("nothing was deleted")
    expect((await getWs(workspace_id)).id).toBe(workspace_id)
  })

  test("a workspace with keys that are not deleted is refused with 400 saying why; once they are deleted it can go", async () => {
    const made = await createWs()
    const { creator_user_id } = await me()
    const active = await keyIn(creator_user_id, made.id, "active")
    const activeMessage = await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" }), 400)
    expect(activeMessage).toContain("1 active API key")
    expect(activeMessage).toContain("Nothing was deleted")
    // A disabled key could be enabled again, so it keeps the workspace too.
    await gw().fetch(`/v1/keys/${active.hash}`, { method: "PATCH", json: { disabled: true } })
    const disabledMessage = await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" }), 400)
    expect(disabledMessage).toContain("1 disabled API key")
    expect((await getWs(made.id)).id).toBe(made.id)
    // A deleted key does not hold the workspace.
    expect((await gw().fetch(`/v1/keys/${active.hash}`, { method: "DELETE" })).status).toBe(200)
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" })
    expect(res.status).toBe(200)
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`), 404)
  })

  test("a key a former member left disabled does not hold the workspace: it is deleted with it", async () => {
    const bob = await otherUser(`user_bob_${++counter}`)
    const made = await createWs()
    await gw().fetch(`/v1/workspaces/${made.id}/members/add`, { method: "POST", json: { user_ids: [bob.userId] } })
    // Bob makes a key in the workspace and disables it, so that the owner may remove him.
    const created = await gw().fetch("/v1/keys", { method: "POST", key: bob.secret, json: { name: "bob-in-team", workspace_id: made.id } })
    const left = ((await created.json()) as { data: { hash: string }; key: string })
    expect(created.status).toBe(201)
    await gw().fetch(`/v1/keys/${left.data.hash}`, { method: "PATCH", key: bob.secret, json: { disabled: true } })
    const removed = await gw().fetch(`/v1/workspaces/${made.id}/members/remove`, { method: "POST", json: { user_ids: [bob.userId] } })
    expect(((await removed.json()) as { removed_count: number }).removed_count).toBe(1)
    // The owner, an admin of the workspace, may still read Bob's key, and need not delete it: the
    // workspace goes, and the key with it.
    expect((await gw().fetch(`/v1/keys/${left.data.hash}`)).status).toBe(200)
    const res = await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" })
    expect(res.status).toBe(200)
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`), 404)
    await expectError(await gw().fetch(`/v1/keys/${left.data.hash}`, { key: bob.secret }), 404)
    const bobsKeys = (await (await gw().fetch("/v1/keys?include_disabled=true", { key: bob.secret })).json()) as { data: Array<{ hash: string }> }
    expect(bobsKeys.data.map((k) => k.hash)).not.toContain(left.data.hash)
    expect(await expectError(await gw().fetch("/v1/key", { key: left.key }), 401)).toBe("Invalid API key")
  })

  test("a current member's keys, even disabled, hold the workspace; the refusal names whose they are and how to clear them", async () => {
    const bob = await otherUser(`user_bob_${++counter}`)
    const made = await createWs()
    const { creator_user_id } = await me()
    await gw().fetch(`/v1/workspaces/${made.id}/members/add`, { method: "POST", json: { user_ids: [bob.userId] } })
    const mine = await keyIn(creator_user_id, made.id, "mine")
    const created = await gw().fetch("/v1/keys", { method: "POST", key: bob.secret, json: { name: "bob-in-team", workspace_id: made.id } })
    const bobs = ((await created.json()) as { data: { hash: string } }).data
    await gw().fetch(`/v1/keys/${bobs.hash}`, { method: "PATCH", key: bob.secret, json: { disabled: true } })
    const message = await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" }), 400)
    expect(message).toContain(`(yours: 1 active API key; ${bob.userId}: 1 disabled API key)`)
    expect(message).toContain("can instead be removed from the workspace")
    expect(message).toContain("Nothing was deleted")
    // The owner clears its own key and removes Bob (his keys there are all disabled): then the workspace can go.
    expect((await gw().fetch(`/v1/keys/${mine.hash}`, { method: "DELETE" })).status).toBe(200)
    await gw().fetch(`/v1/workspaces/${made.id}/members/remove`, { method: "POST", json: { user_ids: [bob.userId] } })
    expect((await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" })).status).toBe(200)
    await expectError(await gw().fetch(`/v1/keys/${bobs.hash}`, { key: bob.secret }), 404)
  })

  test("a workspace other resources still refer to is refused with 400 (not 500) and stays", async () => {
    const made = await createWs()
    // Any table that refers to workspaces without cascading (destinations do) holds the workspace.
    await gw().server.runtime.runPromise(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        Effect.zipRight(
          sql`CREATE TABLE IF NOT EXISTS test_workspace_refs (workspace_id TEXT NOT NULL REFERENCES workspaces(id))`,
          sql`INSERT INTO test_workspace_refs (workspace_id) VALUES (${made.id})`,
        ),
      ),
    )
    const message = await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE" }), 400)
    expect(message).toContain("still holds resources")
    expect(message).toContain("Nothing was deleted")
    expect(await getWs(made.id)).toEqual(made)
    expect((await (await gw().fetch(`/v1/workspaces/${made.id}/members`)).json()) as unknown).toMatchObject({
      data: [{ role: "admin" }],
    })
  })

  test("no credential is 401; an inference key is 403 and deletes nothing", async () => {
    const made = await createWs()
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE", key: null }), 401)
    await expectError(await gw().fetch(`/v1/workspaces/${made.id}`, { method: "DELETE", key: await inferenceKey() }), 403)
    expect((await getWs(made.id)).id).toBe(made.id)
  })
})

describe("Tenancy: another user's workspace does not exist for the caller", () => {
  test("every operation on it is 404, by id and by slug, and changes nothing", async () => {
    const other = await otherUser("user_ws_tenant")
    const theirs = await createWs({ name: "Theirs", slug: uniqueSlug("theirs") }, other.secret)
    for (const ref of [theirs.id, theirs.slug, other.workspaceId]) {
      await expectError(await gw().fetch(`/v1/workspaces/${ref}`), 404)
      await expectError(await gw().fetch(`/v1/workspaces/${ref}`, { method: "PATCH", json: { name: "mine now" } }), 404)
      await expectError(await gw().fetch(`/v1/workspaces/${ref}`, { method: "DELETE" }), 404)
      await expectError(await gw().fetch(`/v1/workspaces/${ref}/members`), 404)
      await expectError(
        await gw().fetch(`/v1/workspaces/${ref}/members/add`, { method: "POST", json: { user_ids: ["user_intruder"] } }),
        404,
      )
      await expectError(
        await gw().fetch(`/v1/workspaces/${ref}/members/remove`, { method: "POST", json: { user_ids: [other.userId] } }),
        404,
      )
    }
    const still = await getWs(theirs.id, other.secret)
    expect(still).toEqual(theirs)
    const members = (await (await gw().fetch(`/v1/workspaces/${theirs.id}/members`, { key: other.secret })).json()) as {
      data: Array<{ user_id: string }>
    }
    expect(members.data.map((m) => m.user_id)).toEqual([other.userId])
  })

  test("the same slug names each user's own workspace", async () => {
    const other = await otherUser("user_ws_slug_owner")
    const slug = uniqueSlug("both")
    const mine = await createWs({ slug })
    const theirs = await createWs({ slug }, other.secret)
    expect((await getWs(slug)).id).toBe(mine.id)
    expect((await getWs(slug, other.secret)).id).toBe(theirs.id)
  })

  test("a plain member sees the workspace but cannot change it (403)", async () => {
    const other = await otherUser("user_ws_member_role")
    const theirs = await createWs({ name: "Led by other" }, other.secret)
    await gw().fetch(`/v1/workspaces/${theirs.id}/members/add`, {
      method: "POST",
      json: { user_ids: [(await me()).creator_user_id] },
      key: other.secret,
    })
    expect((await getWs(theirs.id)).id).toBe(theirs.id)
    expect((await gw().fetch(`/v1/workspaces/${theirs.id}/members`)).status).toBe(200)
    const message = await expectError(await gw().fetch(`/v1/workspaces/${theirs.id}`, { method: "PATCH", json: { name: "x" } }), 403)
    expect(message).toContain("admins")
    await expectError(await gw().fetch(`/v1/workspaces/${theirs.id}`, { method: "DELETE" }), 403)
    await expectError(
      await gw().fetch(`/v1/workspaces/${theirs.id}/members/add`, { method: "POST", json: { user_ids: ["user_x"] } }),
      403,
    )
    expect(await getWs(theirs.id, other.secret)).toEqual(theirs)
  })
})
