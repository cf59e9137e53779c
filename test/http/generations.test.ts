import { beforeAll, describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { GenerationEntry } from "../../src/domain/generations.js"
import { GenerationStore, newGenerationId } from "../../src/services/GenerationStore.js"
import type { KeyStore } from "../../src/services/KeyStore.js"
import type { Users } from "../../src/services/Users.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"
import { newUserKey } from "../support/services.js"
import { expectShape } from "../support/shapes.js"

const gw = useInProcessGateway()

const MANAGEMENT_ONLY = "Only management keys can perform this operation"

interface Me {
  userId: string
  workspaceId: string
  adminHash: string
  /** An inference key of the same user, and its hash. */
  inference: { key: string; hash: string }
}
let me: Me

/** Another user with a management key, and a workspace of theirs. */
let other: { key: string; hash: string; workspaceId: string; userId: string }

const run = <A>(effect: Effect.Effect<A, unknown, GenerationStore | KeyStore | Users | SqlClient.SqlClient>) =>
  gw().server.runtime.runPromise(effect)

beforeAll(async () => {
  const current = (await (await gw().fetch("/v1/key")).json()) as { data: { creator_user_id: string; workspace_id: string } }
  const admin = (await (await gw().fetch("/v1/keys")).json()) as { data: Array<{ hash: string }> }
  const created = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })).json()) as {
    data: { hash: string }
    key: string
  }
  me = {
    userId: current.data.creator_user_id,
    workspaceId: current.data.workspace_id,
    adminHash: admin.data[0]!.hash,
    inference: { key: created.key, hash: created.data.hash },
  }
  const theirs = await run(newUserKey({ name: "other-admin", isManagement: true }))
  other = { key: theirs.secret, hash: theirs.row.hash, userId: theirs.userId, workspaceId: theirs.workspaceId }
})

/** Writes a generation (durably) as the responses path would. */
const recordGeneration = async (overrides: Partial<GenerationEntry> = {}) => {
  const entry: GenerationEntry = {
    id: newGenerationId(),
    keyHash: me.inference.hash,
    userId: me.userId,
    workspaceId: me.workspaceId,
    model: "demo/echo",
    providerName: "fake",
    upstreamModel: "echo-1",
    createdAt: new Date().toISOString(),
    streamed: true,
    cancelled: false,
    finishReason: "stop",
    sessionId: "sess-1",
    inputTokens: 12,
    cachedTokens: 4,
    cacheWriteTokens: 0,
    outputTokens: 7,
    reasoningTokens: 2,
    totalCost: 0.00042,
    isByok: false,
    generationTimeMs: 850,
    latencyMs: 120,
    status: "completed",
    content: {
      input: { messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hello" }] },
      output: { completion: "hi!", reasoning: "greet back" },
    },
    ...overrides,
  }
  await run(Effect.flatMap(GenerationStore, (store) => store.recordDurable(entry)))
  return entry
}

const CONTENT = { input: ["object"], output: ["object"], error: ["object", "null"] } as const

describe("GET /generation/content", () => {
  test("answers {data: {input, output, error}} with messages, completion and reasoning", async () => {
    const g = await recordGeneration()
    const res = await gw().fetch(`/v1/generation/content?id=${g.id}`)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Record<string, unknown> }
    expectShape(body.data, CONTENT)
    expect(body.data).toEqual({
      input: { messages: [{ role: "system", content: "be brief" }, { role: "user", content: "hello" }] },
      output: { completion: "hi!", reasoning: "greet back" },
      error: null,
    })
  })

  test("a prompt input, a null completion and the generation's error with its previous errors", async () => {
    const g = await recordGeneration({
      status: "failed",
      finishReason: "error",
      content: { input: { prompt: "complete this" }, output: { completion: null, reasoning: null } },
      error: {
        message: "Provider returned 502",
        status: 502,
        providerName: "fake",
        raw: { upstream: "bad gateway" },
        previousErrors: [
          { code: 429, message: "rate limited", providerName: "first" },
          { code: "overloaded", message: "busy", providerName: "second", raw: "retry later" },
        ],
      },
    })
    const body = (await (await gw().fetch(`/v1/generation/content?id=${g.id}`)).json()) as { data: Record<string, unknown> }
    expectShape(body.data, CONTENT)
    expect(body.data.input).toEqual({ prompt: "complete this" })
    expect(body.data.output).toEqual({ completion: null, reasoning: null })
    const error = body.data.error as Record<string, unknown>
    expectShape(error, {
      message: ["string"],
      status: ["int"],
      provider_name: ["string", "null"],
      raw: ["object", "string", "null"],
      previous_errors: ["array"],
    })
    expect(error).toEqual({
      message: "Provider returned 502",
      status: 502,
      provider_name: "fake",
      raw: { upstream: "bad gateway" },
      previous_errors: [
        { code: 429, message: "rate limited", provider_name: "first", raw: null },
        { code: "overloaded", message: "busy", provider_name: "second", raw: "retry later" },
      ],
    })
  })

  test("an inference key gets 403 with exactly the management message", async () => {
    const g = await recordGeneration()
    const res = await gw().fetch(`/v1/generation/content?id=${g.id}`, { key: me.inference.key })
    expect(await expectError(res, 403)).toBe(MANAGEMENT_ONLY)
  })

  test("an unknown id is 404", async () => {
    expect(await expectError(await gw().fetch("/v1/generation/content?id=gen-0-unknown"), 404)).toContain("gen-0-unknown")
  })

  test("another user's generation is 404 for me, and mine is 404 for them", async () => {
    const theirs = await recordGeneration({ keyHash: other.hash, userId: other.userId, workspaceId: other.workspaceId })
    const mine = await recordGeneration()
    await expectError(await gw().fetch(`/v1/generation/content?id=${theirs.id}`), 404)
    await expectError(await gw().fetch(`/v1/generation/content?id=${mine.id}`, { key: other.key }), 404)
    expect((await gw().fetch(`/v1/generation/content?id=${theirs.id}`, { key: other.key })).status).toBe(200)
  })

  test("a generation of a workspace I am a member of (not the owner) is readable", async () => {
    const sharedWorkspace = await run(
      Effect.gen(function* () {
        const sql = yield* SqlClient.SqlClient
        const id = crypto.randomUUID()
        const now = new Date().toISOString()
        yield* sql`INSERT INTO workspaces (id, owner_user_id, name, slug, description, is_default, created_by, created_at)
          VALUES (${id}, ${other.userId}, ${"Shared"}, ${`shared-${id.slice(0, 8)}`}, ${""}, 0, ${other.userId}, ${now})`
        yield* sql`INSERT INTO workspace_members (workspace_id, user_id, role, is_scim, created_at)
          VALUES (${id}, ${me.userId}, ${"member"}, 0, ${now})`
        return id
      }),
    )
    const g = await recordGeneration({ keyHash: other.hash, userId: other.userId, workspaceId: sharedWorkspace })
    expect((await gw().fetch(`/v1/generation/content?id=${g.id}`)).status).toBe(200)
  })

  test("a generation whose content was not stored is 404 saying so", async () => {
    const g = await recordGeneration({ content: null })
    const message = await expectError(await gw().fetch(`/v1/generation/content?id=${g.id}`), 404)
    expect(message).toContain("not stored")
  })

  test("a missing or empty id is 400 naming id", async () => {
    expect(await expectError(await gw().fetch("/v1/generation/content"), 400)).toBe("Invalid request: id: is missing")
    expect(await expectError(await gw().fetch("/v1/generation/content?id="), 400)).toBe("Invalid request: id: must not be empty")
  })

  test("an inference key is 403 whatever its query: the key is checked before the id", async () => {
    for (const query of ["", "?id=", "?id=gen-1"]) {
      expect(await expectError(await gw().fetch(`/v1/generation/content${query}`, { key: me.inference.key }), 403)).toContain("Only management keys")
    }
  })

  test("no credential is 401", async () => {
    await expectError(await gw().fetch("/v1/generation/content?id=gen-1", { key: null }), 401)
  })
})

const GENERATION = {
  id: ["string"],
  model: ["string"],
  provider_name: ["string"],
  created_at: ["zoned"],
  total_cost: ["number"],
  usage: ["number"],
  tokens_prompt: ["int"],
  tokens_completion: ["int"],
  native_tokens_prompt: ["int"],
  native_tokens_completion: ["int"],
  native_tokens_reasoning: ["int"],
  native_tokens_cached: ["int"],
  generation_time: ["int"],
  latency: ["int", "null"],
  finish_reason: ["string", "null"],
  streamed: ["boolean"],
  cancelled: ["boolean"],
  is_byok: ["boolean"],
  session_id: ["string", "null"],
  workspace_id: ["string"],
  api_key_hash: ["string"],
  upstream_id: ["string", "null"],
  // Required by the official SDK (GenerationResponseData).
  api_type: ["string"],
  app_id: ["null"],
  cache_discount: ["null"],
  data_region: ["string"],
  http_referer: ["string", "null"],
  moderation_latency: ["null"],
  native_tokens_completion_images: ["null"],
  num_fetches: ["null"],
  num_input_audio_prompt: ["null"],
  num_media_completion: ["null"],
  num_media_prompt: ["null"],
  num_search_results: ["null"],
  origin: ["string"],
  preset_id: ["null"],
  provider_responses: ["null"],
  router: ["null"],
  parent_generation_id: ["null"],
  service_tier: ["null"],
  upstream_inference_cost: ["null"],
  user_agent: ["string", "null"],
  web_search_engine: ["null"],
} as const

describe("GET /generation", () => {
  test("the record of an answer just given is readable at once (still in the ledger queue: flushed for the read)", async () => {
    const answer = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "read me back" } })
    expect(answer.status).toBe(200)
    const id = answer.headers.get("x-generation-id")!
    const res = await gw().fetch(`/v1/generation?id=${id}`)
    expect(res.status).toBe(200)
    expect(((await res.json()) as { data: { id: string; model: string } }).data).toMatchObject({ id, model: "demo/echo" })
  })

  test("answers {data: generation} with every required key and the recorded values", async () => {
    const g = await recordGeneration({ upstreamId: "resp_123", isByok: true })
    const res = await gw().fetch(`/v1/generation?id=${g.id}`)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Record<string, unknown> }
    expectShape(body.data, GENERATION)
    expect(body.data).toMatchObject({
      id: g.id,
      model: "demo/echo",
      upstream_model: "echo-1",
      provider_name: "fake",
      created_at: g.createdAt,
      total_cost: 0.00042,
      usage: 0.00042,
      tokens_prompt: 12,
      tokens_completion: 7,
      native_tokens_prompt: 12,
      native_tokens_completion: 7,
      native_tokens_reasoning: 2,
      native_tokens_cached: 4,
      generation_time: 850,
      latency: 120,
      finish_reason: "stop",
      streamed: true,
      cancelled: false,
      is_byok: true,
      session_id: "sess-1",
      workspace_id: me.workspaceId,
      api_key_hash: me.inference.hash,
      upstream_id: "resp_123",
      status: "completed",
      has_content: true,
    })
  })

  test("an inference key reads the generations made with itself, not those of its user's other keys", async () => {
    const own = await recordGeneration()
    const byAdmin = await recordGeneration({ keyHash: me.adminHash })
    expect((await gw().fetch(`/v1/generation?id=${own.id}`, { key: me.inference.key })).status).toBe(200)
    await expectError(await gw().fetch(`/v1/generation?id=${byAdmin.id}`, { key: me.inference.key }), 404)
  })

  test("another user's generation, and an unknown id, are 404", async () => {
    const theirs = await recordGeneration({ keyHash: other.hash, userId: other.userId, workspaceId: other.workspaceId })
    await expectError(await gw().fetch(`/v1/generation?id=${theirs.id}`), 404)
    await expectError(await gw().fetch("/v1/generation?id=gen-0-unknown"), 404)
  })

  /** Answers one request with `headers` and reads its generation back. */
  const generationOfRequestWith = async (headers: Record<string, string>) => {
    const answer = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "who am i" }, headers })
    expect(answer.status).toBe(200)
    const res = await gw().fetch(`/v1/generation?id=${answer.headers.get("x-generation-id")}`)
    return ((await res.json()) as { data: Record<string, unknown> }).data
  }

  test("HTTP-Referer, X-OpenRouter-Title (or X-Title) and User-Agent are recorded as http_referer/origin, app_name, user_agent", async () => {
    const g = await generationOfRequestWith({
      "http-referer": "https://app.example.com/chat",
      "x-openrouter-title": "My App",
      "x-title": "Legacy Title",
      "user-agent": "my-client/1.2",
    })
    expect(g).toMatchObject({
      http_referer: "https://app.example.com/chat",
      origin: "https://app.example.com/chat",
      app_name: "My App",
      app_id: null,
      user_agent: "my-client/1.2",
      data_region: "global",
    })
    expect((await generationOfRequestWith({ "x-title": "Legacy Title" })).app_name).toBe("Legacy Title")
  })

  test("without those headers: http_referer and app_name are null, origin is \"\"", async () => {
    const g = await generationOfRequestWith({})
    expect(g).toMatchObject({ http_referer: null, origin: "", app_name: null })
  })

  test("a client header longer than 512 characters is kept cut at 512", async () => {
    const long = `https://app.example.com/${"a".repeat(2000)}`
    const g = await generationOfRequestWith({ "http-referer": long, "x-title": "t".repeat(600), "user-agent": "u".repeat(513) })
    expect(g.http_referer).toBe(long.slice(0, 512))
    expect(g.app_name).toBe("t".repeat(512))
    expect(g.user_agent).toBe("u".repeat(512))
  })

  test("a missing or empty id is 400 naming id; no credential is 401", async () => {
    expect(await expectError(await gw().fetch("/v1/generation"), 400)).toContain("id")
    expect(await expectError(await gw().fetch("/v1/generation?id="), 400)).toContain("id")
    await expectError(await gw().fetch("/v1/generation?id=x", { key: null }), 401)
  })
})
