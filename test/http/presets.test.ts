import { beforeAll, describe, expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { MANAGEMENT_ONLY } from "../../src/services/Auth.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { PresetStore } from "../../src/services/PresetStore.js"
import { Users } from "../../src/services/Users.js"
import { demoCatalogWith } from "../support/catalog.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"
import { expectShape } from "../support/shapes.js"

// Presets name catalog models only (refused at write otherwise).
const gw = useInProcessGateway({
  catalog: demoCatalogWith(["fake/echo", "fake/other", "fake/one", "fake/two", "a/one", "a/two", "mine/m", "theirs/m"]),
})

const PRESET = {
  id: ["string"],
  slug: ["string"],
  name: ["string"],
  description: ["string"],
  status: ["string"],
  workspace_id: ["string"],
  creator_user_id: ["string"],
  designated_version_id: ["string"],
  created_at: ["zoned"],
  updated_at: ["zoned"],
  status_updated_at: ["zoned"],
} as const

const VERSION = {
  id: ["string"],
  preset_id: ["string"],
  version: ["int"],
  config: ["object"],
  system_prompt: ["string", "null"],
  creator_id: ["string"],
  created_at: ["zoned"],
  updated_at: ["zoned"],
} as const

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

interface Version {
  id: string
  preset_id: string
  version: number
  config: Record<string, unknown>
  system_prompt: string | null
  creator_id: string
  created_at: string
  updated_at: string
}
interface Preset {
  id: string
  slug: string
  name: string
  status: string
  workspace_id: string
  creator_user_id: string
  designated_version_id: string
  created_at: string
  updated_at: string
  status_updated_at: string
}
type Created = { data: Preset & { designated_version: Version } }
type VersionPage = { data: Array<Version>; total_count: number }

let slugs = 0
const newSlug = (what: string) => `${what}-${++slugs}`

const createVersion = async (slug: string, json: unknown = { model: "fake/echo" }, key?: string) => {
  const res = await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json, key })
  if (res.status !== 200) throw new Error(`expected 200, got ${res.status}: ${await res.text()}`)
  return (await res.json()) as Created
}

const versionsOf = async (slug: string, query = "", key?: string) => {
  const res = await gw().fetch(`/v1/presets/${slug}/versions${query}`, { key })
  expect(res.status).toBe(200)
  return (await res.json()) as VersionPage
}

/** An inference key of the admin's user, and a management key of a second user. */
const keys = {} as { inference: string; otherUser: string; adminUserId: string; adminWorkspaceId: string }
beforeAll(async () => {
  const created = await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })
  const body = (await created.json()) as { key: string; data: { creator_user_id: string; workspace_id: string } }
  keys.inference = body.key
  keys.adminUserId = body.data.creator_user_id
  keys.adminWorkspaceId = body.data.workspace_id
  const other = await gw().server.runtime.runPromise(
    Effect.gen(function* () {
      const workspaceId = yield* (yield* Users).ensure("user_other_presets")
      return yield* (yield* KeyStore).create({
        userId: "user_other_presets",
        workspaceId,
        name: "other-admin",
        isManagement: true,
      })
    }),
  )
  keys.otherUser = other.secret
})

describe("POST /presets/{slug}/responses (create a preset version)", () => {
  test("the first call creates the preset with version 1: {data: preset & {designated_version}}", async () => {
    const slug = newSlug("first")
    const body = await createVersion(slug, {
      model: "fake/echo",
      temperature: 0.3,
      instructions: "Answer in French.",
      input: "not stored",
      stream: true,
    })
    expectShape(body.data, { ...PRESET, designated_version: ["object"] })
    expectShape(body.data.designated_version, VERSION)
    const { designated_version: v, ...preset } = body.data
    expect(preset).toMatchObject({
      slug,
      name: slug,
      description: "",
      status: "active",
      workspace_id: keys.adminWorkspaceId,
      creator_user_id: keys.adminUserId,
      designated_version_id: v.id,
    })
    expect(preset.id).toMatch(UUID)
    expect(preset.updated_at).toBe(preset.created_at)
    expect(preset.status_updated_at).toBe(preset.created_at)
    expect(v.id).toMatch(UUID)
    expect(v).toMatchObject({ preset_id: preset.id, version: 1, system_prompt: "Answer in French.", creator_id: keys.adminUserId })
    // instructions become system_prompt; input and stream belong to one request, not to a preset.
    expect(v.config).toEqual({ model: "fake/echo", temperature: 0.3 })
    expect(v.updated_at).toBe(v.created_at)
  })

  test("each later call adds the next immutable version and designates it; the preset keeps its id", async () => {
    const slug = newSlug("later")
    const one = await createVersion(slug, { model: "a/one", instructions: "v1" })
    const two = await createVersion(slug, { model: "a/two", top_p: 0.5 })
    expect(two.data.id).toBe(one.data.id)
    expect(two.data.created_at).toBe(one.data.created_at)
    expect(Date.parse(two.data.updated_at)).toBeGreaterThanOrEqual(Date.parse(one.data.updated_at))
    expect(two.data.designated_version).toMatchObject({ version: 2, config: { model: "a/two", top_p: 0.5 }, system_prompt: null })
    expect(two.data.designated_version_id).toBe(two.data.designated_version.id)
    expect(two.data.designated_version.id).not.toBe(one.data.designated_version.id)
    // Version 1 is unchanged.
    const first = (await (await gw().fetch(`/v1/presets/${slug}/versions/1`)).json()) as { data: Version }
    expect(first.data).toEqual(one.data.designated_version)
    const preset = (await (await gw().fetch(`/v1/presets/${slug}`)).json()) as { data: Preset }
    expect(preset.data.designated_version_id).toBe(two.data.designated_version.id)
  })

  test("system_prompt is null (key present) without instructions; an empty body is a valid version", async () => {
    const body = await createVersion(newSlug("empty"), {})
    expect(Object.keys(body.data.designated_version)).toContain("system_prompt")
    expect(body.data.designated_version.system_prompt).toBeNull()
    expect(body.data.designated_version.config).toEqual({})
  })

  test("config keeps the request's routing fields and drops per-request and unknown ones", async () => {
    const body = await createVersion(newSlug("config"), {
      model: "fake/echo",
      models: ["fake/other"],
      max_output_tokens: 256,
      provider: { order: ["fake"], allow_fallbacks: false },
      plugins: [{ id: "web", enabled: false }],
      reasoning: { effort: "low" },
      text: { format: { type: "json_object" } },
      metadata: { team: "search" },
      tools: [{ type: "function", name: "lookup", parameters: { type: "object" } }],
      // Per-request: dropped.
      input: [{ role: "user", content: "hi" }],
      stream: false,
      store: false,
      background: false,
      session_id: "s-1",
      user: "end-user-1",
      safety_identifier: "sid",
      debug: { echo_upstream_body: true },
      preset: "another",
      // Not a request field: dropped.
      not_a_field: 1,
    })
    const config = body.data.designated_version.config
    expect(Object.keys(config).sort()).toEqual(
      ["max_output_tokens", "metadata", "model", "models", "plugins", "provider", "reasoning", "text", "tools"].sort(),
    )
    expect(config).toMatchObject({
      model: "fake/echo",
      models: ["fake/other"],
      max_output_tokens: 256,
      provider: { order: ["fake"], allow_fallbacks: false },
      metadata: { team: "search" },
    })
  })

  test("an invalid request field is 400 naming the field, and creates nothing", async () => {
    const slug = newSlug("invalid")
    for (const [json, field] of [
      [{ temperature: 3 }, "temperature"],
      [{ model: 5 }, "model"],
      [{ max_output_tokens: 1.5 }, "max_output_tokens"],
      [{ store: true }, "store"],
      [{ previous_response_id: "resp_1" }, "previous_response_id"],
      [{ metadata: Object.fromEntries(Array.from({ length: 17 }, (_, i) => [`k${i}`, "v"])) }, "metadata"],
      [{ session_id: "s".repeat(257) }, "session_id"],
      [{ plugins: [{ id: "nope" }] }, "plugins"],
      [{ instructions: 7 }, "instructions"],
    ] as const) {
      const res = await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json })
      expect(await expectError(res, 400)).toContain(field)
    }
    expect(await expectError(await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json: [1] }), 400)).toContain(
      "object",
    )
    await expectError(await gw().fetch(`/v1/presets/${slug}`), 404)
    // On an existing preset, a refused body adds no version.
    await createVersion(slug)
    await expectError(await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json: { top_p: 2 } }), 400)
    expect((await versionsOf(slug)).total_count).toBe(1)
  })

  test("slug: 1 and 100 URL-safe characters are accepted; others are 400 naming slug", async () => {
    await createVersion("a")
    await createVersion(`b${"x".repeat(99)}`)
    await createVersion("my_preset.v2-beta")
    for (const bad of ["Upper", "-dash-first", `c${"x".repeat(100)}`, "has%20space", "semi%3Bcolon", "%C3%A9t%C3%A9"]) {
      const res = await gw().fetch(`/v1/presets/${bad}/responses`, { method: "POST", json: { model: "x" } })
      expect(await expectError(res, 400)).toContain("slug")
    }
  })

  test("no credential or a wrong one is 401; an inference key is 403 with the management message", async () => {
    const slug = newSlug("auth")
    await expectError(await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json: {}, key: null }), 401)
    await expectError(await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json: {}, key: "sk-gw-v1-no" }), 401)
    const res = await gw().fetch(`/v1/presets/${slug}/responses`, { method: "POST", json: {}, key: keys.inference })
    expect(await expectError(res, 403)).toBe(MANAGEMENT_ONLY)
    await expectError(await gw().fetch(`/v1/presets/${slug}`), 404)
  })

  test("the same slug for two users is two presets; each sees only its own", async () => {
    const slug = newSlug("shared-name")
    const mine = await createVersion(slug, { model: "mine/m" })
    const theirs = await createVersion(slug, { model: "theirs/m" }, keys.otherUser)
    expect(theirs.data.id).not.toBe(mine.data.id)
    expect(theirs.data.designated_version.version).toBe(1)
    const seen = (await (await gw().fetch(`/v1/presets/${slug}/versions`)).json()) as VersionPage
    expect(seen.data.map((v) => v.config.model)).toEqual(["mine/m"])
  })

  test("20 concurrent creates of a new preset give one preset with versions 1..20, no gaps or duplicates", async () => {
    const slug = newSlug("concurrent")
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => createVersion(slug, { model: "fake/echo", instructions: `call ${i}` })),
    )
    expect(new Set(results.map((r) => r.data.id)).size).toBe(1)
    expect(results.map((r) => r.data.designated_version.version).sort((a, b) => a - b)).toEqual(
      Array.from({ length: 20 }, (_, i) => i + 1),
    )
    const page = await versionsOf(slug)
    expect(page.total_count).toBe(20)
    expect(page.data.map((v) => v.version)).toEqual(Array.from({ length: 20 }, (_, i) => i + 1))
    expect(new Set(page.data.map((v) => v.system_prompt)).size).toBe(20)
    // The designated version is the latest.
    const preset = (await (await gw().fetch(`/v1/presets/${slug}`)).json()) as { data: Preset }
    expect(preset.data.designated_version_id).toBe(page.data[19]?.id ?? "")
  })
})

describe("GET /presets/{slug}/versions (operation 6)", () => {
  const slug = "paged"
  beforeAll(async () => {
    for (let i = 1; i <= 120; i++) await createVersion(slug, { model: "fake/echo", instructions: `v${i}` })
  })

  test("answers {data: [version], total_count}, oldest first, 50 by default", async () => {
    const page = await versionsOf(slug)
    expectShape(page, { data: ["array"], total_count: ["int"] })
    expect(page.total_count).toBe(120)
    expect(page.data.length).toBe(50)
    for (const v of page.data) expectShape(v, VERSION)
    expect(page.data.map((v) => v.version)).toEqual(Array.from({ length: 50 }, (_, i) => i + 1))
    expect(page.data[0]?.system_prompt).toBe("v1")
  })

  test("paging by offset += data.length while a page is full returns each version exactly once, in order", async () => {
    for (const limit of [7, 50, 100]) {
      const seen: Array<number> = []
      let offset = 0
      for (;;) {
        const page = await versionsOf(slug, `?limit=${limit}&offset=${offset}`)
        expect(page.total_count).toBe(120)
        expect(page.data.length).toBeLessThanOrEqual(limit)
        seen.push(...page.data.map((v) => v.version))
        offset += page.data.length
        if (page.data.length < limit) break
      }
      expect(seen).toEqual(Array.from({ length: 120 }, (_, i) => i + 1))
    }
  })

  test("limit 1 and 100 are accepted; offset is honoured exactly; past the end is an empty page", async () => {
    expect((await versionsOf(slug, "?limit=1")).data.map((v) => v.version)).toEqual([1])
    expect((await versionsOf(slug, "?limit=100")).data.length).toBe(100)
    expect((await versionsOf(slug, "?limit=1&offset=119")).data.map((v) => v.version)).toEqual([120])
    expect((await versionsOf(slug, "?offset=0&limit=2")).data.map((v) => v.version)).toEqual([1, 2])
    const past = await versionsOf(slug, "?offset=500")
    expect(past).toEqual({ data: [], total_count: 120 })
  })

  test("limit 0, 101, -1, 1.5 or abc and offset -1, 1.5 or abc are 400 naming the parameter", async () => {
    for (const [query, field] of [
      ["limit=0", "limit"],
      ["limit=101", "limit"],
      ["limit=-1", "limit"],
      ["limit=1.5", "limit"],
      ["limit=abc", "limit"],
      ["limit=", "limit"],
      ["offset=-1", "offset"],
      ["offset=1.5", "offset"],
      ["offset=abc", "offset"],
    ] as const) {
      const message = await expectError(await gw().fetch(`/v1/presets/${slug}/versions?${query}`), 400)
      expect(message).toContain(field)
    }
  })

  test("an unknown preset is 404; another user's preset is 404", async () => {
    expect(await expectError(await gw().fetch("/v1/presets/no-such-preset/versions"), 404)).toContain("no-such-preset")
    await expectError(await gw().fetch(`/v1/presets/${slug}/versions`, { key: keys.otherUser }), 404)
  })

  test("a bad slug is 400 naming slug", async () => {
    expect(await expectError(await gw().fetch("/v1/presets/Bad!/versions"), 400)).toContain("slug")
  })

  test("any key of the user may read (inference keys use presets); no credential is 401", async () => {
    expect((await versionsOf(slug, "?limit=3", keys.inference)).data.length).toBe(3)
    await expectError(await gw().fetch(`/v1/presets/${slug}/versions`, { key: null }), 401)
  })
})

describe("GET /presets/{slug}/versions/{version}", () => {
  test("answers {data: version} with every required key", async () => {
    const slug = newSlug("one-version")
    const created = await createVersion(slug, { model: "fake/echo", instructions: "hello" })
    await createVersion(slug, { model: "fake/two" })
    const res = await gw().fetch(`/v1/presets/${slug}/versions/1`)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Version }
    expectShape(body.data, VERSION)
    expect(body.data).toEqual(created.data.designated_version)
    const two = (await (await gw().fetch(`/v1/presets/${slug}/versions/2`, { key: keys.inference })).json()) as {
      data: Version
    }
    expect(two.data).toMatchObject({ version: 2, config: { model: "fake/two" }, system_prompt: null })
  })

  test("an unknown version, an unknown preset and another user's preset are 404", async () => {
    const slug = newSlug("versions-404")
    await createVersion(slug)
    expect(await expectError(await gw().fetch(`/v1/presets/${slug}/versions/2`), 404)).toContain("2")
    await expectError(await gw().fetch("/v1/presets/nobody-here/versions/1"), 404)
    await expectError(await gw().fetch(`/v1/presets/${slug}/versions/1`, { key: keys.otherUser }), 404)
  })

  test("a version that is not a positive integer is 400 naming version; a bad slug is 400 naming slug", async () => {
    const slug = newSlug("versions-400")
    await createVersion(slug)
    for (const bad of ["0", "-1", "1.5", "abc"]) {
      expect(await expectError(await gw().fetch(`/v1/presets/${slug}/versions/${bad}`), 400)).toContain("version")
    }
    expect(await expectError(await gw().fetch("/v1/presets/_x/versions/1"), 400)).toContain("slug")
  })

  test("no credential is 401", async () => {
    await expectError(await gw().fetch("/v1/presets/a/versions/1", { key: null }), 401)
  })
})

describe("GET /presets and GET /presets/{slug}", () => {
  test("GET /presets lists the caller's presets only, each with every required key", async () => {
    const slug = newSlug("listed")
    await createVersion(slug)
    const otherSlug = newSlug("other-only")
    await createVersion(otherSlug, {}, keys.otherUser)
    const res = await gw().fetch("/v1/presets")
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Array<Preset> }
    for (const p of body.data) {
      expectShape(p, PRESET)
      expect(p.creator_user_id).toBe(keys.adminUserId)
    }
    expect(body.data.map((p) => p.slug)).toContain(slug)
    expect(body.data.map((p) => p.slug)).not.toContain(otherSlug)
    const theirs = (await (await gw().fetch("/v1/presets", { key: keys.otherUser })).json()) as { data: Array<Preset> }
    expect(theirs.data.map((p) => p.slug)).toContain(otherSlug)
    expect(theirs.data.map((p) => p.slug)).not.toContain(slug)
  })

  test("GET /presets/{slug} answers {data: preset & {designated_version}}; inference keys may read", async () => {
    const slug = newSlug("get-one")
    const created = await createVersion(slug)
    await createVersion(slug)
    const body = (await (await gw().fetch(`/v1/presets/${slug}`, { key: keys.inference })).json()) as {
      data: Preset & { designated_version: Version }
    }
    expectShape(body.data, PRESET)
    expectShape(body.data.designated_version, VERSION)
    // The designated version is the latest one.
    expect(body.data.designated_version.version).toBe(2)
    expect(body.data.designated_version.id).toBe(body.data.designated_version_id)
    expect(body.data.id).toBe(created.data.id)
  })

  test("unknown or another user's preset is 404; bad slug 400; no credential 401", async () => {
    const slug = newSlug("private")
    await createVersion(slug)
    await expectError(await gw().fetch("/v1/presets/never-made"), 404)
    await expectError(await gw().fetch(`/v1/presets/${slug}`, { key: keys.otherUser }), 404)
    expect(await expectError(await gw().fetch("/v1/presets/UPPER"), 400)).toContain("slug")
    await expectError(await gw().fetch("/v1/presets", { key: null }), 401)
  })
})

describe("PresetStore.resolve (what the request path uses)", () => {
  const resolve = (userId: string, slug: string) =>
    gw().server.runtime.runPromise(Effect.flatMap(PresetStore, (store) => store.resolve(userId, slug)))

  test("gives the preset and its designated (latest) version, and sees a new version at once", async () => {
    const slug = newSlug("resolve")
    await createVersion(slug, { model: "fake/one", instructions: "first" })
    const first = Option.getOrThrow(await resolve(keys.adminUserId, slug))
    expect(first.version).toMatchObject({ version: 1, system_prompt: "first", config: { model: "fake/one" } })
    expect(first.preset.designated_version_id).toBe(first.version.id)
    await createVersion(slug, { model: "fake/two" })
    const second = Option.getOrThrow(await resolve(keys.adminUserId, slug))
    expect(second.version).toMatchObject({ version: 2, system_prompt: null, config: { model: "fake/two" } })
    expect(second.preset.id).toBe(first.preset.id)
  })

  test("is none for an unknown slug and for another user's preset", async () => {
    const slug = newSlug("resolve-private")
    await createVersion(slug)
    expect(Option.isNone(await resolve(keys.adminUserId, "never-made"))).toBe(true)
    expect(Option.isNone(await resolve("user_other_presets", slug))).toBe(true)
  })
})
