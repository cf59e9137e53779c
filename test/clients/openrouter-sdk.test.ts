/**
 * The official SDK of this API family (`@openrouter/sdk`, pinned) against the gateway: every SDK
 * method whose endpoint the gateway serves is called, its answer must pass the SDK's own zod
 * schemas (a missing required key is a `ResponseValidationError`), and every refusal must come
 * back as the SDK's typed error class for its status.
 *
 * Served: apiKeys.{list,create,get,update,delete,getCurrentKeyMetadata}, credits.getCredits,
 * workspaces.{list,create,get,update,delete,listMembers,bulkAddMembers,bulkRemoveMembers},
 * presets.{list,get,createPresetsResponses,listVersions,getVersion},
 * generations.{getGeneration,listGenerationContent}, observability.{list,create,get,update,delete},
 * responses.send (JSON and stream; beta.responses.send is the same function).
 * Not served (no endpoint): chat.send, presets.createPresetsChatCompletions/Messages, workspaces
 * budgets, generations.submitFeedback, and the rest of the SDK (models, byok, guardrails, …).
 */
import { describe, expect, test } from "bun:test"
import { HTTPClient } from "@openrouter/sdk"
import type { ObservabilityDestination, OpenResponsesResult } from "@openrouter/sdk/models"
import * as errors from "@openrouter/sdk/models/errors"
import type { CreateResponsesResponse } from "@openrouter/sdk/models/operations"
import { demoCatalog } from "../../src/config/Config.js"
import { useGateway } from "../support/gateway.js"
import { caught, expectTyped, openRouterAt, readStream } from "../support/sdk.js"

// One guardrail, for the typed 403 that carries routing metadata.
const gw = useGateway({ catalog: { ...demoCatalog, guardrails: [{ id: "gr_sdk", name: "No secrets", patterns: ["password\\s*[:=]"] }] } })

/** The `X-Generation-Id` of the latest answer any SDK client here received. */
let lastGenerationId: string | undefined
const httpClient = new HTTPClient().addHook("response", (res) => {
  const id = res.headers.get("x-generation-id")
  if (id !== null) lastGenerationId = id
})

const sdk = (apiKey: string = gw().adminKey, extra: { httpReferer?: string; appTitle?: string; userAgent?: string } = {}) =>
  openRouterAt(gw(), apiKey, { httpClient, ...extra })

/** A destination the SDK recognised as one of its kinds (an unknown kind parses to a raw placeholder). */
const known = (d: ObservabilityDestination) => {
  if (!("id" in d)) throw new Error(`the SDK did not recognise the destination: ${JSON.stringify(d)}`)
  return d
}

/** A JSON result, not a stream. */
const whole = (r: CreateResponsesResponse): OpenResponsesResult => {
  if (Symbol.asyncIterator in r) throw new Error("expected a JSON result, got a stream")
  return r
}

/** A stream, not a JSON result. */
const streamOf = (r: CreateResponsesResponse) => {
  if (!(Symbol.asyncIterator in r)) throw new Error("expected a stream, got a JSON result")
  return r
}

/** An inference (non-management) key of the admin, made through the SDK. */
const inferenceKey = async () => {
  const made = await sdk().apiKeys.create({ requestBody: { name: "inference" } })
  return made.key
}

describe("apiKeys", () => {
  test("create, list, get, update and delete validate against the SDK", async () => {
    const created = await sdk().apiKeys.create({ requestBody: { name: "sdk key", limit: 5, limitReset: "monthly" } })
    expect(created.key.startsWith("sk-")).toBe(true)
    const hash = created.data.hash
    const list = await sdk().apiKeys.list()
    expect(list.data.some((k) => k.hash === hash)).toBe(true)
    const got = await sdk().apiKeys.get({ hash })
    expect(got.data.name).toBe("sdk key")
    const updated = await sdk().apiKeys.update({ hash, requestBody: { name: "renamed", limit: null } })
    expect(updated.data.name).toBe("renamed")
    expect(updated.data.limit).toBeNull()
    const deleted = await sdk().apiKeys.delete({ hash })
    expect(deleted.deleted).toBe(true)
  })

  test("list({workspaceId}) lists only that workspace's keys; a workspace the caller cannot use is NotFound", async () => {
    const ws = await sdk().workspaces.create({ createWorkspaceRequest: { name: "Keyed", slug: "sdk-keyed" } })
    const made = await sdk().apiKeys.create({ requestBody: { name: "in keyed", workspaceId: ws.data.id } })
    const listed = await sdk().apiKeys.list({ workspaceId: ws.data.id })
    expect(listed.data.map((k) => k.hash)).toEqual([made.data.hash])
    expectTyped(await caught(sdk().apiKeys.list({ workspaceId: "00000000-0000-4000-8000-000000000000" })), errors.OpenRouterDefaultError, 404)
  })

  test("getCurrentKeyMetadata (GET /key) validates, for a management and an inference key", async () => {
    const admin = await sdk().apiKeys.getCurrentKeyMetadata()
    expect(admin.data.isManagementKey).toBe(true)
    expect(admin.data.allowedDataRegions).toEqual(["global"])
    expect(admin.data.organizationId).toBeNull()
    // Stated defaults: no daily cap on free models, and no count of them.
    expect(admin.data.freeModelDailyRequests).toEqual({ limit: -1, remaining: -1, used: -1 })
    const inference = await sdk(await inferenceKey()).apiKeys.getCurrentKeyMetadata()
    expect(inference.data.isManagementKey).toBe(false)
  })

  test("errors: unknown hash is NotFound, bad key Unauthorized, inference key Forbidden, bad body BadRequest", async () => {
    expectTyped(await caught(sdk().apiKeys.get({ hash: "0".repeat(64) })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").apiKeys.list()), errors.UnauthorizedResponseError, 401)
    expectTyped(await caught(sdk("sk-gw-v1-nope").apiKeys.getCurrentKeyMetadata()), errors.UnauthorizedResponseError, 401)
    const inference = sdk(await inferenceKey())
    expectTyped(await caught(inference.apiKeys.list()), errors.OpenRouterDefaultError, 403)
    expectTyped(await caught(inference.apiKeys.create({ requestBody: { name: "x" } })), errors.ForbiddenResponseError, 403)
    expectTyped(await caught(sdk().apiKeys.create({ requestBody: { name: "" } })), errors.BadRequestResponseError, 400)
    expectTyped(await caught(sdk().apiKeys.update({ hash: "0".repeat(64), requestBody: { name: "x" } })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().apiKeys.delete({ hash: "0".repeat(64) })), errors.NotFoundResponseError, 404)
  })
})

describe("credits", () => {
  test("getCredits validates; an unknown key is Unauthorized", async () => {
    const credits = await sdk().credits.getCredits()
    expect(typeof credits.data.totalCredits).toBe("number")
    expectTyped(await caught(sdk("sk-gw-v1-nope").credits.getCredits()), errors.UnauthorizedResponseError, 401)
  })
})

describe("workspaces", () => {
  test("create, list, get, update, members list/add/remove and delete validate", async () => {
    const created = await sdk().workspaces.create({ createWorkspaceRequest: { name: "SDK space", slug: "sdk-space" } })
    const id = created.data.id
    const list = await sdk().workspaces.list()
    expect(list.result.data.some((w) => w.id === id)).toBe(true)
    expect((await sdk().workspaces.get({ id: "sdk-space" })).data.id).toBe(id)
    const updated = await sdk().workspaces.update({ id, updateWorkspaceRequest: { description: "from the sdk" } })
    expect(updated.data.description).toBe("from the sdk")
    const added = await sdk().workspaces.bulkAddMembers({ id, bulkAddWorkspaceMembersRequest: { userIds: ["user_sdk_a", "user_sdk_b"] } })
    expect(added.addedCount).toBe(2)
    const members = await sdk().workspaces.listMembers({ id })
    expect(members.result.totalCount).toBe(members.result.data.length)
    expect(members.result.data.map((m) => m.userId)).toEqual(expect.arrayContaining(["user_sdk_a", "user_sdk_b"]))
    const removed = await sdk().workspaces.bulkRemoveMembers({ id, bulkRemoveWorkspaceMembersRequest: { userIds: ["user_sdk_a"] } })
    expect(removed.removedCount).toBe(1)
    expect((await sdk().workspaces.delete({ id })).deleted).toBe(true)
  })

  test("listMembers pages by limit and offset and counts every member in total_count", async () => {
    const ws = await sdk().workspaces.create({ createWorkspaceRequest: { name: "Paged", slug: "sdk-paged" } })
    const id = ws.data.id
    await sdk().workspaces.bulkAddMembers({ id, bulkAddWorkspaceMembersRequest: { userIds: ["user_pg_1", "user_pg_2", "user_pg_3"] } })
    const first = await sdk().workspaces.listMembers({ id, limit: 2 })
    expect(first.result.data.length).toBe(2)
    expect(first.result.totalCount).toBe(4)
    // The SDK's iterator follows offset while a page is full; it must end.
    const seen: Array<string> = []
    for await (const page of first) seen.push(...page.result.data.map((m) => m.userId))
    expect(new Set(seen).size).toBe(4)
    expect(seen.length).toBe(4)
  })

  test("errors: unknown workspace NotFound, inference key Forbidden, bad input BadRequest", async () => {
    expectTyped(await caught(sdk().workspaces.get({ id: "no-such-space" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().workspaces.listMembers({ id: "no-such-space" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").workspaces.list()), errors.UnauthorizedResponseError, 401)
    const inference = sdk(await inferenceKey())
    expectTyped(await caught(inference.workspaces.list()), errors.OpenRouterDefaultError, 403)
    expectTyped(
      await caught(sdk().workspaces.create({ createWorkspaceRequest: { name: "Bad", slug: "Not A Slug!" } })),
      errors.BadRequestResponseError,
      400,
    )
    expectTyped(
      await caught(sdk().workspaces.bulkAddMembers({ id: "no-such-space", bulkAddWorkspaceMembersRequest: { userIds: ["u"] } })),
      errors.NotFoundResponseError,
      404,
    )
    expectTyped(await caught(sdk().workspaces.delete({ id: "no-such-space" })), errors.NotFoundResponseError, 404)
  })
})

describe("presets", () => {
  test("createPresetsResponses, list, get, listVersions and getVersion validate", async () => {
    const made = await sdk().presets.createPresetsResponses({
      slug: "sdk-preset",
      responsesRequest: { model: "demo/echo", instructions: "Be brief.", temperature: 0.2 },
    })
    expect(made.data.slug).toBe("sdk-preset")
    await sdk().presets.createPresetsResponses({ slug: "sdk-preset", responsesRequest: { model: "demo/echo" } })
    const list = await sdk().presets.list()
    expect(list.result.totalCount).toBe(list.result.data.length)
    expect(list.result.data.some((p) => p.slug === "sdk-preset")).toBe(true)
    const got = await sdk().presets.get({ slug: "sdk-preset" })
    expect(got.data.designatedVersion?.version).toBe(2)
    expect(got.data.designatedVersion?.id).toBe(got.data.designatedVersionId ?? "")
    const versions = await sdk().presets.listVersions({ slug: "sdk-preset" })
    expect(versions.result.totalCount).toBe(2)
    const one = await sdk().presets.getVersion({ slug: "sdk-preset", version: "1" })
    expect(one.data?.systemPrompt).toBe("Be brief.")
  })

  test("errors: unknown preset NotFound, inference key Forbidden on writes, bad body BadRequest", async () => {
    expectTyped(await caught(sdk().presets.get({ slug: "no-such-preset" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().presets.listVersions({ slug: "no-such-preset" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().presets.getVersion({ slug: "no-such-preset", version: "1" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").presets.list()), errors.UnauthorizedResponseError, 401)
    // Reads take any key of the user; writes need a management key.
    const inference = sdk(await inferenceKey())
    expect((await inference.presets.list()).result.totalCount).toBe((await sdk().presets.list()).result.totalCount)
    expectTyped(
      await caught(inference.presets.createPresetsResponses({ slug: "sdk-inference", responsesRequest: { model: "demo/echo" } })),
      errors.ForbiddenResponseError,
      403,
    )
    expectTyped(
      await caught(sdk().presets.createPresetsResponses({ slug: "sdk-bad", responsesRequest: { model: "demo/echo", temperature: 9 } })),
      errors.BadRequestResponseError,
      400,
    )
  })
})

describe("observability destinations", () => {
  test("create, list, get, update and delete validate", async () => {
    const created = await sdk().observability.create({
      createObservabilityDestinationRequest: { name: "hook", type: "webhook", config: { url: "https://hooks.example.com/in" } },
    })
    const id = known(created.data).id
    const list = await sdk().observability.list()
    expect(list.result.totalCount).toBe(list.result.data.length)
    expect(list.result.data.some((d) => known(d).id === id)).toBe(true)
    expect(known((await sdk().observability.get({ id })).data).name).toBe("hook")
    const updated = await sdk().observability.update({ id, updateObservabilityDestinationRequest: { name: "hook 2", enabled: false } })
    expect(known(updated.data).name).toBe("hook 2")
    expect((await sdk().observability.delete({ id })).deleted).toBe(true)
  })

  test("errors: unknown id NotFound, inference key Forbidden, bad config BadRequest", async () => {
    const none = "00000000-0000-4000-8000-000000000000"
    expectTyped(await caught(sdk().observability.get({ id: none })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().observability.delete({ id: none })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").observability.list()), errors.UnauthorizedResponseError, 401)
    expectTyped(await caught(sdk(await inferenceKey()).observability.list()), errors.OpenRouterDefaultError, 403)
    expectTyped(
      await caught(
        sdk().observability.create({ createObservabilityDestinationRequest: { name: "bad", type: "webhook", config: { url: "ftp://x" } } }),
      ),
      errors.BadRequestResponseError,
      400,
    )
  })
})

describe("responses and generations", () => {
  test("responses.send (JSON) validates and its generation and content validate through the SDK", async () => {
    const me = await sdk().apiKeys.getCurrentKeyMetadata()
    await sdk().workspaces.update({ id: me.data.workspaceId!, updateWorkspaceRequest: { isObservabilityIoLoggingEnabled: true } })
    const client = sdk(gw().adminKey, { httpReferer: "https://app.example.com/page", appTitle: "SDK Test App" })
    const result = whole(await client.responses.send({ responsesRequest: { model: "demo/echo", input: "hello sdk" } }))
    expect(result.status).toBe("completed")
    expect(result.output[0]?.type).toBe("message")
    await gw().server.drain()
    const generation = await sdk().generations.getGeneration({ id: lastGenerationId! })
    expect(generation.data.model).toBe("demo/echo")
    expect(generation.data.dataRegion).toBe("global")
    expect(generation.data.httpReferer).toBe("https://app.example.com/page")
    expect(generation.data.origin).toBe("https://app.example.com/page")
    expect(generation.data.userAgent).toContain("@openrouter/sdk")
    expect(generation.data.appId).toBeNull()
    const content = await sdk().generations.listGenerationContent({ id: generation.data.id })
    expect(content.data.output.completion).toBe("Echo: hello sdk")
  })

  test("responses.send (stream) yields events the SDK accepts, ending with response.completed", async () => {
    const stream = streamOf(await sdk().responses.send({ responsesRequest: { model: "demo/echo", input: "stream via sdk", stream: true } }))
    const { types, text } = await readStream(stream)
    expect(types[0]).toBe("response.created")
    expect(types[types.length - 1]).toBe("response.completed")
    expect(text).toBe("Echo: stream via sdk")
  })

  test("beta.responses.send is the same call", async () => {
    const result = whole(await sdk().beta.responses.send({ responsesRequest: { model: "demo/echo", input: "beta" } }))
    expect(result.status).toBe("completed")
  })

  test("errors: unknown model NotFound, bad key Unauthorized, bad input BadRequest", async () => {
    expectTyped(await caught(sdk().responses.send({ responsesRequest: { model: "nobody/none", input: "x" } })), errors.NotFoundResponseError, 404)
    expectTyped(
      await caught(sdk("sk-gw-v1-nope").responses.send({ responsesRequest: { model: "demo/echo", input: "x" } })),
      errors.UnauthorizedResponseError,
      401,
    )
    expectTyped(
      await caught(sdk().responses.send({ responsesRequest: { model: "demo/echo", input: "x", metadata: { "a[b]": "c" } } })),
      errors.BadRequestResponseError,
      400,
    )
  })

  test("generation errors: unknown id NotFound, inference key Forbidden on content, empty id BadRequest", async () => {
    expectTyped(await caught(sdk().generations.getGeneration({ id: "gen-0-none" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk().generations.listGenerationContent({ id: "gen-0-none" })), errors.NotFoundResponseError, 404)
    expectTyped(await caught(sdk("sk-gw-v1-nope").generations.getGeneration({ id: "gen-0-none" })), errors.UnauthorizedResponseError, 401)
    expectTyped(
      await caught(sdk(await inferenceKey()).generations.listGenerationContent({ id: "gen-0-none" })),
      errors.ForbiddenResponseError,
      403,
    )
    expectTyped(await caught(sdk().generations.getGeneration({ id: "" })), errors.OpenRouterDefaultError, 400)
  })
})

describe("routing metadata: X-OpenRouter-Metadata is an alias of X-Service-Metadata", () => {
  const ROUTED = { requested: "demo/echo", attempt: 0, isByok: false, region: null }

  test("responses.send with xOpenRouterMetadata: enabled carries openrouterMetadata on the typed result", async () => {
    const result = whole(
      await sdk().responses.send({ xOpenRouterMetadata: "enabled", responsesRequest: { model: "demo/echo", input: "meta" } }),
    )
    expect(result.openrouterMetadata).toMatchObject(ROUTED)
    // demo/echo's two endpoints (config/demo.json).
    expect(result.openrouterMetadata?.endpoints.total).toBe(2)
  })

  test("the stream's response.completed carries it too", async () => {
    const stream = streamOf(
      await sdk().responses.send({ xOpenRouterMetadata: "enabled", responsesRequest: { model: "demo/echo", input: "meta", stream: true } }),
    )
    let completed: OpenResponsesResult | undefined
    for await (const event of stream) if (event.type === "response.completed") completed = event.response
    expect(completed?.openrouterMetadata).toMatchObject(ROUTED)
  })

  test("without the header the SDK's result has no openrouterMetadata", async () => {
    const result = whole(await sdk().responses.send({ responsesRequest: { model: "demo/echo", input: "no meta" } }))
    expect(result.openrouterMetadata).toBeUndefined()
  })

  test("a guardrail block is a ForbiddenResponseError whose openrouterMetadata names the guardrail", async () => {
    const e = await caught(
      sdk().responses.send({ xOpenRouterMetadata: "enabled", responsesRequest: { model: "demo/echo", input: "password: hunter2" } }),
    )
    expectTyped(e, errors.ForbiddenResponseError, 403)
    const pipeline = (e as errors.ForbiddenResponseError).openrouterMetadata?.pipeline as Array<{ type: string; guardrail_id: string }>
    expect(pipeline[0]).toMatchObject({ type: "guardrail", guardrail_id: "gr_sdk" })
  })

  /** The raw answer to a plain request with `headers`. */
  const raw = async (headers: Record<string, string>, stream = false) => {
    const res = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "raw", stream }, headers })
    expect(res.status).toBe(200)
    return res.text()
  }

  test("each name answers as asked: the SDK's header gets both keys (same content), the contract's only service_metadata", async () => {
    for (const header of ["x-openrouter-metadata", "x-openrouter-experimental-metadata"]) {
      const body = JSON.parse(await raw({ [header]: "enabled" })) as Record<string, unknown>
      expect(body.openrouter_metadata).toEqual(body.service_metadata)
      expect(body.service_metadata).toMatchObject({ requested: "demo/echo" })
    }
    const contract = JSON.parse(await raw({ "x-service-metadata": "enabled" })) as Record<string, unknown>
    expect(contract.service_metadata).toMatchObject({ requested: "demo/echo" })
    expect("openrouter_metadata" in contract).toBe(false)
    const disabled = JSON.parse(await raw({ "x-openrouter-metadata": "disabled" })) as Record<string, unknown>
    expect("service_metadata" in disabled || "openrouter_metadata" in disabled).toBe(false)
  })

  test("streamed: response.completed holds openrouter_metadata only when the SDK's header asked", async () => {
    const completedOf = (text: string) => {
      const line = text.split("\n").find((l) => l.startsWith("data: ") && l.includes('"type":"response.completed"'))
      return (JSON.parse(line!.slice(6)) as { response: Record<string, unknown> }).response
    }
    const aliased = completedOf(await raw({ "x-openrouter-metadata": "enabled" }, true))
    expect(aliased.openrouter_metadata).toMatchObject({ requested: "demo/echo" })
    expect(aliased.openrouter_metadata).toEqual(aliased.service_metadata)
    const contract = completedOf(await raw({ "x-service-metadata": "enabled" }, true))
    expect("openrouter_metadata" in contract).toBe(false)
    expect(contract.service_metadata).toMatchObject({ requested: "demo/echo" })
  })
})
