import { describe, expect, test } from "bun:test"
import { API_KEY, expectShape } from "../support/shapes.js"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

interface KeyBody {
  data: Record<string, unknown> & { hash: string; label: string; limit: number | null }
  key: string
}

const createKey = async (json: Record<string, unknown>, key?: string) => {
  const res = await gw().fetch("/v1/keys", { method: "POST", json, key })
  expect(res.status).toBe(201)
  return (await res.json()) as KeyBody
}

describe("POST /keys (create)", () => {
  test("answers 201 with the key object and the secret shown once", async () => {
    const body = await createKey({ name: "ci", limit: 12.5, limit_reset: "monthly", include_byok_in_limit: true })
    expectShape(body.data, API_KEY)
    expect(body.key).toMatch(/^sk-gw-v1-[0-9a-f]{64}$/)
    expect(body.data.label).toBe(`sk-gw-v1-${body.key.slice(9, 12)}...${body.key.slice(-3)}`)
    expect(body.data.limit).toBe(12.5)
    expect(body.data.limit_remaining).toBe(12.5)
    expect(body.data.limit_reset).toBe("monthly")
    expect(body.data.include_byok_in_limit).toBe(true)
    expect(body.data.disabled).toBe(false)
    // The secret is never shown again.
    const again = (await (await gw().fetch(`/v1/keys/${body.data.hash}`)).json()) as Record<string, unknown>
    expect(JSON.stringify(again)).not.toContain(body.key)
  })

  test("the new key authenticates", async () => {
    const { key } = await createKey({ name: "works" })
    const res = await gw().fetch("/v1/key", { key })
    expect(res.status).toBe(200)
  })

  test("name of 256 characters is accepted, 257 refused naming name", async () => {
    await createKey({ name: "n".repeat(256) })
    const res = await gw().fetch("/v1/keys", { method: "POST", json: { name: "n".repeat(257) } })
    expect(await expectError(res, 400)).toContain("name")
  })

  test("missing name, empty name, negative limit, unknown limit_reset and unzoned expires_at are 400", async () => {
    for (const [json, field] of [
      [{}, "name"],
      [{ name: "" }, "name"],
      [{ name: "x", limit: -0.01 }, "limit"],
      [{ name: "x", limit_reset: "yearly" }, "limit_reset"],
      [{ name: "x", expires_at: "2030-01-01T00:00:00" }, "expires_at"],
      [{ name: "x", expires_at: "2001-01-01T00:00:00Z" }, "expires_at"],
    ] as const) {
      const res = await gw().fetch("/v1/keys", { method: "POST", json })
      expect(await expectError(res, 400)).toContain(field)
    }
    // A literal's rule names every allowed value, not only the first (`Expected "daily"`).
    const reset = await expectError(await gw().fetch("/v1/keys", { method: "POST", json: { name: "x", limit_reset: "yearly" } }), 400)
    expect(reset).toContain("limit_reset: must be one of daily, weekly, monthly, or null")
    expect(await expectError(await gw().fetch("/v1/keys?include_disabled=maybe"), 400)).toContain("include_disabled: must be true or false")
    expect(await expectError(await gw().fetch("/v1/generations?status=foo"), 400)).toContain("status: must be one of completed, incomplete, failed, cancelled")
    // A body that is no object says so, not as a type written in words ("Expected an object").
    for (const body of ["[]", "5", "null"]) {
      const res = await gw().fetch("/v1/keys", { method: "POST", body, headers: { "content-type": "application/json" } })
      expect(await expectError(res, 400)).toBe("Invalid request: the body must be a JSON object")
    }
  })

  test("limit 0 is accepted (a key that can spend nothing)", async () => {
    const body = await createKey({ name: "zero", limit: 0 })
    expect(body.data.limit).toBe(0)
    expect(body.data.limit_remaining).toBe(0)
  })

  test("an expiry with a zone is stored and returned in UTC", async () => {
    const body = await createKey({ name: "exp", expires_at: "2099-01-01T01:00:00+01:00" })
    expect(body.data.expires_at).toBe("2099-01-01T00:00:00.000Z")
  })

  test("expires_at with a field out of range or a date that does not exist is 400 naming the rule, never 500", async () => {
    for (const expires_at of [
      "2099-13-45T00:00:00Z",
      "2030-00-10T00:00:00Z",
      "2030-01-01T00:00:00+25:00",
      "2030-01-01T00:00:00+23:99",
      "2099-12-31T23:59:60Z",
      "2099-12-31T24:00:00Z",
      "2099-02-30T00:00:00Z",
      "2100-02-29T00:00:00Z",
      "2099-04-31T00:00:00Z",
    ]) {
      const message = await expectError(await gw().fetch("/v1/keys", { method: "POST", json: { name: "x", expires_at } }), 400)
      expect(message).toContain("expires_at: must be an ISO 8601 timestamp")
      expect(message).toContain("in range")
    }
  })

  test("expires_at on a real day at the edges of the ranges is accepted as given", async () => {
    for (const [expires_at, utc] of [
      ["2096-02-29T23:59:59Z", "2096-02-29T23:59:59.000Z"],
      ["2099-12-31T23:59:59.5-23:59", "2100-01-01T23:58:59.500Z"],
      ["2099-01-01T00:00:00+23:59", "2098-12-31T00:01:00.000Z"],
    ] as const) {
      expect((await createKey({ name: "edge", expires_at })).data.expires_at).toBe(utc)
    }
  })

  test("a positive limit below a nano-dollar is 400 naming limit (it would be stored as 0); one nano-dollar is kept", async () => {
    const message = await expectError(await gw().fetch("/v1/keys", { method: "POST", json: { name: "a", limit: 0.0000000001 } }), 400)
    expect(message).toContain("limit: a positive limit must be at least 0.000000001")
    expect((await createKey({ name: "nano", limit: 0.000000001 })).data.limit).toBe(0.000000001)
  })

  test("a workspace the caller cannot use is 404", async () => {
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      json: { name: "x", workspace_id: "00000000-0000-4000-8000-000000000000" },
    })
    await expectError(res, 404)
  })
})

describe("GET /keys/{hash}", () => {
  test("answers {data: key} with every required key", async () => {
    const { data } = await createKey({ name: "get-me" })
    const res = await gw().fetch(`/v1/keys/${data.hash}`)
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: unknown }
    expectShape(body.data, API_KEY)
    expect(body.data).toMatchObject({ hash: data.hash, name: "get-me" })
  })

  test("an unknown hash is 404", async () => {
    await expectError(await gw().fetch(`/v1/keys/${"0".repeat(64)}`), 404)
  })

  test("no credential is 401, a wrong one is 401", async () => {
    await expectError(await gw().fetch(`/v1/keys/x`, { key: null }), 401)
    await expectError(await gw().fetch(`/v1/keys/x`, { key: "sk-gw-v1-nope" }), 401)
  })

  test("an inference key is 403 with the management message", async () => {
    const { key, data } = await createKey({ name: "inference" })
    const message = await expectError(await gw().fetch(`/v1/keys/${data.hash}`, { key }), 403)
    expect(message).toBe("Only management keys can perform this operation")
  })

  test("another user's key is 404, so existence does not leak", async () => {
    // A second user, created by the CLI path: a management key of a new owner.
    const { runtime } = gw().server
    const { KeyStore } = await import("../../src/services/KeyStore.js")
    const { Users } = await import("../../src/services/Users.js")
    const { Effect } = await import("effect")
    const other = await runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const keys = yield* KeyStore
        const workspaceId = yield* users.ensure("user_other")
        return yield* keys.create({ userId: "user_other", workspaceId, name: "other-admin", isManagement: true })
      }),
    )
    const mine = await createKey({ name: "mine" })
    await expectError(await gw().fetch(`/v1/keys/${mine.data.hash}`, { key: other.secret }), 404)
    await expectError(await gw().fetch(`/v1/keys/${other.row.hash}`), 404)
    await expectError(await gw().fetch(`/v1/keys/${other.row.hash}`, { method: "PATCH", json: { disabled: true } }), 404)
    await expectError(await gw().fetch(`/v1/keys/${other.row.hash}`, { method: "DELETE" }), 404)
    const list = (await (await gw().fetch("/v1/keys", { key: other.secret })).json()) as { data: Array<{ hash: string }> }
    expect(list.data.map((k) => k.hash)).toEqual([other.row.hash])
  })
})

describe("PATCH /keys/{hash}", () => {
  test("updates every body field and answers {data: key}", async () => {
    const { data } = await createKey({ name: "patch-me" })
    const res = await gw().fetch(`/v1/keys/${data.hash}`, {
      method: "PATCH",
      json: { name: "renamed", limit: 3, limit_reset: "daily", include_byok_in_limit: true, disabled: false },
    })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Record<string, unknown> }
    expectShape(body.data, API_KEY)
    expect(body.data).toMatchObject({
      name: "renamed",
      limit: 3,
      limit_remaining: 3,
      limit_reset: "daily",
      include_byok_in_limit: true,
      disabled: false,
    })
    expect(Date.parse(body.data.updated_at as string)).toBeGreaterThanOrEqual(Date.parse(body.data.created_at as string))
  })

  test("limit: null removes the limit; limit_reset: null removes the reset", async () => {
    const { data } = await createKey({ name: "limited", limit: 5, limit_reset: "weekly" })
    const res = await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { limit: null, limit_reset: null } })
    const body = (await res.json()) as { data: Record<string, unknown> }
    expect(body.data.limit).toBeNull()
    expect(body.data.limit_remaining).toBeNull()
    expect(body.data.limit_reset).toBeNull()
  })

  test("an empty body changes nothing", async () => {
    const { data } = await createKey({ name: "same", limit: 2 })
    const body = (await (await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: {} })).json()) as {
      data: Record<string, unknown>
    }
    expect(body.data).toMatchObject({ name: "same", limit: 2 })
  })

  test("bad fields are 400 naming the field and change nothing", async () => {
    const { data } = await createKey({ name: "keep", limit: 1 })
    for (const [json, field] of [
      [{ limit: -1 }, "limit"],
      [{ limit: "5" }, "limit"],
      [{ limit_reset: "hourly" }, "limit_reset"],
      [{ disabled: "yes" }, "disabled"],
      [{ name: "" }, "name"],
      [{ name: "x".repeat(257) }, "name"],
    ] as const) {
      const res = await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json })
      expect(await expectError(res, 400)).toContain(field)
    }
    const after = (await (await gw().fetch(`/v1/keys/${data.hash}`)).json()) as { data: Record<string, unknown> }
    expect(after.data).toMatchObject({ name: "keep", limit: 1, disabled: false, limit_reset: null })
  })

  test("a positive limit below a nano-dollar is 400 naming limit and changes nothing", async () => {
    const { data } = await createKey({ name: "keep-limit", limit: 1 })
    const res = await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { limit: 0.0000000001 } })
    expect(await expectError(res, 400)).toContain("limit: a positive limit must be at least 0.000000001")
    const after = (await (await gw().fetch(`/v1/keys/${data.hash}`)).json()) as { data: Record<string, unknown> }
    expect(after.data.limit).toBe(1)
  })

  test("a disabled key is refused by the very next request, and works again when re-enabled", async () => {
    const { key, data } = await createKey({ name: "toggle" })
    expect((await gw().fetch("/v1/key", { key })).status).toBe(200)
    await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { disabled: true } })
    expect(await expectError(await gw().fetch("/v1/key", { key }), 401)).toContain("disabled")
    await gw().fetch(`/v1/keys/${data.hash}`, { method: "PATCH", json: { disabled: false } })
    expect((await gw().fetch("/v1/key", { key })).status).toBe(200)
  })

  test("unknown hash is 404", async () => {
    await expectError(await gw().fetch(`/v1/keys/nope`, { method: "PATCH", json: { name: "x" } }), 404)
  })
})

describe("DELETE /keys/{hash}", () => {
  test("answers {deleted: true}; the key stops working at once and is gone from GET", async () => {
    const { key, data } = await createKey({ name: "doomed" })
    expect((await gw().fetch("/v1/key", { key })).status).toBe(200)
    const res = await gw().fetch(`/v1/keys/${data.hash}`, { method: "DELETE" })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ deleted: true })
    await expectError(await gw().fetch("/v1/key", { key }), 401)
    await expectError(await gw().fetch(`/v1/keys/${data.hash}`), 404)
    await expectError(await gw().fetch(`/v1/keys/${data.hash}`, { method: "DELETE" }), 404)
  })
})

describe("GET /keys (list)", () => {
  test("lists the caller's keys; disabled ones only with include_disabled=true; offset pages", async () => {
    const a = await createKey({ name: "list-a" })
    await gw().fetch(`/v1/keys/${a.data.hash}`, { method: "PATCH", json: { disabled: true } })
    const enabled = (await (await gw().fetch("/v1/keys")).json()) as { data: Array<Record<string, unknown>> }
    for (const k of enabled.data) expectShape(k, API_KEY)
    expect(enabled.data.some((k) => k.hash === a.data.hash)).toBe(false)
    const all = (await (await gw().fetch("/v1/keys?include_disabled=true")).json()) as { data: Array<{ hash: string }> }
    expect(all.data.some((k) => k.hash === a.data.hash)).toBe(true)
    const paged = (await (await gw().fetch("/v1/keys?include_disabled=true&offset=1")).json()) as {
      data: Array<{ hash: string }>
    }
    expect(paged.data).toEqual(all.data.slice(1))
  })

  test("a negative or non-numeric offset is 400 naming offset", async () => {
    expect(await expectError(await gw().fetch("/v1/keys?offset=-1"), 400)).toContain("offset")
    expect(await expectError(await gw().fetch("/v1/keys?offset=abc"), 400)).toContain("offset")
  })
})

describe("GET /key (the calling key)", () => {
  test("usage counts an answer given just before (the ledger's queue is written for the read)", async () => {
    const usage = async () => ((await (await gw().fetch("/v1/key")).json()) as { data: { usage: number } }).data.usage
    const before = await usage()
    const answer = await gw().fetch("/v1/responses", { method: "POST", json: { model: "demo/echo", input: "count me" } })
    const cost = ((await answer.json()) as { usage: { cost: number } }).usage.cost
    expect(cost).toBeGreaterThan(0)
    expect(await usage()).toBeCloseTo(before + cost, 12)
  })

  test("works for any key and says whether it is a management key", async () => {
    const { key } = await createKey({ name: "me", limit: 4, limit_reset: "weekly" })
    const res = await gw().fetch("/v1/key", { key })
    const body = (await res.json()) as { data: Record<string, unknown> }
    const { hash: _hash, name: _name, disabled: _disabled, created_at: _c, updated_at: _u, external_user: _e, ...shared } = API_KEY
    expectShape(body.data, {
      ...shared,
      is_management_key: ["boolean"],
      is_provisioning_key: ["boolean"],
      is_free_tier: ["boolean"],
      workspace_id: ["string"],
      rate_limit: ["object"],
    })
    expect(body.data).toMatchObject({ limit: 4, limit_reset: "weekly", is_management_key: false, is_provisioning_key: false })
    const admin = (await (await gw().fetch("/v1/key")).json()) as { data: Record<string, unknown> }
    expect(admin.data.is_management_key).toBe(true)
  })

  test("an expired key is 401", async () => {
    const { runtime } = gw().server
    const { KeyStore } = await import("../../src/services/KeyStore.js")
    const { Effect } = await import("effect")
    const me = (await (await gw().fetch("/v1/key")).json()) as { data: { creator_user_id: string; workspace_id: string } }
    const { secret } = await runtime.runPromise(
      Effect.flatMap(KeyStore, (keys) =>
        keys.create({
          userId: me.data.creator_user_id,
          workspaceId: me.data.workspace_id,
          name: "expired",
          expiresAt: "2020-01-01T00:00:00.000Z",
        }),
      ),
    )
    expect(await expectError(await gw().fetch("/v1/key", { key: secret }), 401)).toContain("expired")
  })
})

describe("GET /credits", () => {
  test("answers {data: {total_credits, total_usage}} in USD", async () => {
    const res = await gw().fetch("/v1/credits")
    expect(res.status).toBe(200)
    const body = (await res.json()) as { data: Record<string, unknown> }
    expectShape(body.data, { total_credits: ["number"], total_usage: ["number"] })
  })
})
