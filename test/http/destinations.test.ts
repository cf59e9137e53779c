import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { existsSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { Effect, Either, Layer, Option, Redacted } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import { Destinations } from "../../src/services/Destinations.js"
import type { KeyStore } from "../../src/services/KeyStore.js"
import { SECRET_KEY_FILE, Secrets } from "../../src/services/secrets.js"
import type { Users } from "../../src/services/Users.js"
import { expectError, useGateway } from "../support/gateway.js"
import { newUserKey } from "../support/services.js"
import { expectShape } from "../support/shapes.js"

const dataDir = join(tmpdir(), `gw-destinations-${crypto.randomUUID()}`)
afterAll(() => rmSync(dataDir, { recursive: true, force: true }))

const gw = useGateway({ dataDir })

const MANAGEMENT_ONLY = "Only management keys can perform this operation"
const PATH = "/v1/observability/destinations"

const DESTINATION = {
  id: ["string"],
  workspace_id: ["string"],
  name: ["string"],
  type: ["string"],
  enabled: ["boolean"],
  privacy_mode: ["boolean"],
  sampling_rate: ["number"],
  api_key_hashes: ["array", "null"],
  filter_rules: ["object", "null"],
  config: ["object"],
  regions: ["array"],
  broadcast_generation_cost: ["boolean"],
  broadcast_generation_identity: ["boolean"],
  broadcast_generation_request_context: ["boolean"],
  created_at: ["zoned"],
  updated_at: ["zoned"],
} as const

const mask = (s: string) => (s.length < 16 ? "****" : `****${s.slice(-4)}`)

/** Every kind with a full config, its required keys, and the keys we treat as secrets. */
const KINDS: Record<string, { config: Record<string, string>; required: Array<string>; secrets: Array<string> }> = {
  langfuse: {
    config: { publicKey: "pk-lf-1234567890EfGh", secretKey: "sk-lf-0987654321wxyz", baseUrl: "https://cloud.langfuse.com" },
    required: ["publicKey", "secretKey"],
    secrets: ["publicKey", "secretKey"],
  },
  webhook: { config: { url: "https://hooks.example.com/in", method: "PUT" }, required: ["url"], secrets: [] },
  "otel-collector": { config: { endpoint: "https://otel.example.com/v1/traces" }, required: ["endpoint"], secrets: [] },
  datadog: { config: { apiKey: "dd-api-key-0123456789", mlApp: "gateway" }, required: ["apiKey", "mlApp"], secrets: ["apiKey"] },
  langsmith: { config: { apiKey: "ls-api-key-0123456789", project: "p1" }, required: ["apiKey"], secrets: ["apiKey"] },
  posthog: { config: { apiKey: "phc_0123456789abcdef" }, required: ["apiKey"], secrets: ["apiKey"] },
  s3: {
    config: {
      accessKeyId: "AKIA0123456789ABCDEF",
      secretAccessKey: "s3-secret-access-key-0123456789",
      bucketName: "traces",
      region: "eu-west-1",
      endpoint: "https://s3.example.com",
    },
    required: ["accessKeyId", "secretAccessKey", "bucketName"],
    secrets: ["accessKeyId", "secretAccessKey"],
  },
  sentry: {
    config: { dsn: "https://abcdef0123456789@o1.ingest.sentry.io/1", otlpEndpoint: "https://o1.ingest.sentry.io/otlp" },
    required: ["dsn", "otlpEndpoint"],
    secrets: ["dsn"],
  },
  clickhouse: {
    config: { host: "https://ch.example.com:8443", database: "traces", username: "writer", password: "ch-password-0123456789" },
    required: ["host", "database", "username", "password"],
    secrets: ["password"],
  },
  arize: {
    config: { apiKey: "arize-api-key-0123456789", spaceKey: "space-1", modelId: "gateway" },
    required: ["apiKey", "spaceKey", "modelId"],
    secrets: ["apiKey"],
  },
  braintrust: { config: { apiKey: "bt-api-key-0123456789", projectId: "proj-1" }, required: ["apiKey", "projectId"], secrets: ["apiKey"] },
  grafana: { config: { apiKey: "glc_0123456789abcdef", instanceId: "123456" }, required: ["apiKey", "instanceId"], secrets: ["apiKey"] },
  newrelic: { config: { licenseKey: "nr-license-0123456789", region: "eu" }, required: ["licenseKey"], secrets: ["licenseKey"] },
  opik: {
    config: { apiKey: "opik-api-key-0123456789", projectName: "gateway", workspace: "team" },
    required: ["apiKey", "projectName", "workspace"],
    secrets: ["apiKey"],
  },
  ramp: { config: { apiKey: "ramp-api-key-0123456789" }, required: ["apiKey"], secrets: ["apiKey"] },
  snowflake: { config: { account: "xy12345", token: "sf-token-0123456789" }, required: ["account", "token"], secrets: ["token"] },
  weave: {
    config: { apiKey: "weave-api-key-0123456789", entity: "team", project: "gateway" },
    required: ["apiKey", "entity", "project"],
    secrets: ["apiKey"],
  },
}

const LANGFUSE = KINDS.langfuse!.config

interface DestinationBody {
  data: Record<string, unknown> & { id: string; config: Record<string, unknown>; updated_at: string }
}

const create = async (json: Record<string, unknown>, key?: string) => {
  const res = await gw().fetch(PATH, { method: "POST", json: { name: "dest", type: "langfuse", config: LANGFUSE, ...json }, key })
  const body = (await res.json()) as DestinationBody
  if (res.status !== 201) throw new Error(`expected 201, got ${res.status}: ${JSON.stringify(body)}`)
  return body.data
}

const refusedCreate = async (json: Record<string, unknown>) =>
  expectError(await gw().fetch(PATH, { method: "POST", json: { name: "dest", type: "langfuse", config: LANGFUSE, ...json } }), 400)

const patch = (id: string, json: Record<string, unknown>, key?: string) =>
  gw().fetch(`${PATH}/${id}`, { method: "PATCH", json, key })

const getOne = async (id: string) => ((await (await gw().fetch(`${PATH}/${id}`)).json()) as DestinationBody).data

const run = <A>(effect: Effect.Effect<A, unknown, Destinations | KeyStore | Users | SqlClient.SqlClient | Secrets>) =>
  gw().server.runtime.runPromise(effect)

/** The stored config, decrypted by the service (what delivery would use). */
const resolvedConfig = (id: string) =>
  run(Effect.map(Effect.flatMap(Destinations, (d) => d.resolved(id)), (r) => Option.getOrThrow(r).config))

let me: { userId: string; workspaceId: string; inference: { key: string; hash: string } }
let other: { key: string; hash: string; userId: string; workspaceId: string }

beforeAll(async () => {
  const current = (await (await gw().fetch("/v1/key")).json()) as { data: { creator_user_id: string; workspace_id: string } }
  const created = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })).json()) as {
    data: { hash: string }
    key: string
  }
  me = {
    userId: current.data.creator_user_id,
    workspaceId: current.data.workspace_id,
    inference: { key: created.key, hash: created.data.hash },
  }
  const theirs = await run(newUserKey({ name: "other-admin", isManagement: true }))
  other = { key: theirs.secret, hash: theirs.row.hash, userId: theirs.userId, workspaceId: theirs.workspaceId }
})

describe("POST /observability/destinations", () => {
  test("answers 201 {data: destination} with every required key, the defaults, and masked secrets", async () => {
    const res = await gw().fetch(PATH, { method: "POST", json: { name: "traces", type: "langfuse", config: LANGFUSE } })
    expect(res.status).toBe(201)
    const { data } = (await res.json()) as DestinationBody
    expectShape(data, DESTINATION)
    expect(data.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/)
    expect(data).toMatchObject({
      workspace_id: me.workspaceId,
      name: "traces",
      type: "langfuse",
      enabled: true,
      privacy_mode: false,
      sampling_rate: 1,
      api_key_hashes: null,
      filter_rules: null,
      regions: ["global"],
      broadcast_generation_cost: true,
      broadcast_generation_identity: true,
      broadcast_generation_request_context: true,
    })
    expect(data.config).toEqual({ publicKey: "****EfGh", secretKey: "****wxyz", baseUrl: "https://cloud.langfuse.com" })
    expect(data.created_at).toBe(data.updated_at)
  })

  test("every settings field is stored as given", async () => {
    const rules = {
      enabled: true,
      groups: [
        {
          logic: "or",
          rules: [
            { field: "model", operator: "starts_with", value: "openai/" },
            { field: "total_cost", operator: "gte", value: 0.5 },
            { field: "output", operator: "regex", value: "^err(or)?$" },
            { field: "session_id", operator: "exists" },
          ],
        },
      ],
    }
    const sent = {
      enabled: false,
      privacy_mode: true,
      sampling_rate: 0.25,
      api_key_hashes: [me.inference.hash],
      filter_rules: rules,
      regions: ["europe", "us"],
      broadcast_generation_cost: false,
      broadcast_generation_identity: false,
      broadcast_generation_request_context: false,
    }
    const data = await create(sent)
    expect(data).toMatchObject(sent)
    expect(await getOne(data.id)).toEqual(data)
  })

  test("each of the 17 kinds is accepted with its keys; secrets come back masked, the rest as sent", async () => {
    expect(Object.keys(KINDS)).toHaveLength(17)
    for (const [type, kind] of Object.entries(KINDS)) {
      const data = await create({ name: type, type, config: kind.config })
      expectShape(data, DESTINATION)
      expect(data.type).toBe(type)
      const expected = Object.fromEntries(
        Object.entries(kind.config).map(([k, v]) => [k, kind.secrets.includes(k) ? mask(v) : v]),
      )
      expect(data.config).toEqual(expected)
      expect(await resolvedConfig(data.id)).toEqual(kind.config)
    }
  })

  test("each kind with only its required keys is accepted", async () => {
    for (const [type, kind] of Object.entries(KINDS)) {
      const config = Object.fromEntries(kind.required.map((k) => [k, kind.config[k]]))
      expect((await create({ type, config })).type).toBe(type)
    }
  })

  test("each kind refuses a config without one of its required keys, naming config.<key>", async () => {
    for (const [type, kind] of Object.entries(KINDS)) {
      for (const missing of kind.required) {
        const config = Object.fromEntries(Object.entries(kind.config).filter(([k]) => k !== missing))
        const message = await refusedCreate({ type, config })
        expect(message).toContain(`config.${missing}: is missing`)
      }
    }
  })

  test("an unknown type is 400 naming type; a missing name, type or config is 400 naming it", async () => {
    expect(await refusedCreate({ type: "splunk" })).toContain("type")
    for (const field of ["name", "type", "config"]) {
      const json: Record<string, unknown> = { name: "n", type: "langfuse", config: LANGFUSE }
      delete json[field]
      const res = await gw().fetch(PATH, { method: "POST", json })
      expect(await expectError(res, 400)).toContain(`${field}: is missing`)
    }
    expect(await refusedCreate({ config: ["x"] })).toContain("config: must be an object")
  })

  test("config: unknown keys, empty values, non-URLs, methods other than POST/PUT and non-string headers are 400 naming the key", async () => {
    expect(await refusedCreate({ config: { ...LANGFUSE, host: "x" } })).toContain("config.host")
    expect(await refusedCreate({ config: { ...LANGFUSE, secretKey: "" } })).toContain("config.secretKey")
    expect(await refusedCreate({ config: { ...LANGFUSE, baseUrl: "not a url" } })).toContain("config.baseUrl")
    expect(await refusedCreate({ type: "webhook", config: { url: "ftp://x.example" } })).toContain("config.url")
    expect(await refusedCreate({ type: "webhook", config: { url: "https://x.example", method: "GET" } })).toContain(
      "config.method",
    )
    expect(
      await refusedCreate({ type: "webhook", config: { url: "https://x.example", headers: { "x-token": 5 } } }),
    ).toContain("config.headers.x-token")
    expect(await refusedCreate({ type: "otel-collector", config: { endpoint: "https://o.example", headers: "a=b" } })).toContain(
      "config.headers",
    )
  })

  test("a config value of 4096 characters is accepted, 4097 refused naming the key", async () => {
    await create({ config: { ...LANGFUSE, secretKey: "s".repeat(4096) } })
    expect(await refusedCreate({ config: { ...LANGFUSE, secretKey: "s".repeat(4097) } })).toContain("config.secretKey")
  })

  test("name of 1 and 100 characters is accepted; empty and 101 refused naming name", async () => {
    await create({ name: "n" })
    await create({ name: "n".repeat(100) })
    expect(await refusedCreate({ name: "" })).toContain("name")
    expect(await refusedCreate({ name: "n".repeat(101) })).toContain("name")
  })

  test("sampling_rate 0 and 1 are accepted; -0.01 and 1.01 are refused naming sampling_rate", async () => {
    expect((await create({ sampling_rate: 0 })).sampling_rate).toBe(0)
    expect((await create({ sampling_rate: 1 })).sampling_rate).toBe(1)
    expect(await refusedCreate({ sampling_rate: -0.01 })).toContain("sampling_rate")
    expect(await refusedCreate({ sampling_rate: 1.01 })).toContain("sampling_rate")
    expect(await refusedCreate({ sampling_rate: "0.5" })).toContain("sampling_rate")
  })

  test("regions global, europe and us are accepted; anything else is 400 naming regions[i]", async () => {
    expect((await create({ regions: ["global", "europe", "us"] })).regions).toEqual(["global", "europe", "us"])
    expect(await refusedCreate({ regions: ["global", "asia"] })).toContain("regions[1]")
  })

  test("filter_rules: null is accepted; each broken part is 400 naming its path", async () => {
    expect((await create({ filter_rules: null })).filter_rules).toBeNull()
    const withRule = (rule: Record<string, unknown>, logic = "and") => ({ enabled: true, groups: [{ logic, rules: [rule] }] })
    const at = "filter_rules.groups[0].rules[0]"
    for (const [rules, path] of [
      [withRule({ field: "colour", operator: "equals", value: "x" }), `${at}.field`],
      [withRule({ field: "model", operator: "like", value: "x" }), `${at}.operator`],
      [withRule({ field: "model", operator: "equals", value: "x" }, "xor"), "filter_rules.groups[0].logic"],
      [withRule({ field: "model", operator: "regex", value: "(unclosed" }), `${at}.value`],
      [withRule({ field: "total_cost", operator: "gt", value: "1" }), `${at}.value`],
      [withRule({ field: "model", operator: "equals" }), `${at}.value`],
      [{ groups: [] }, "filter_rules.enabled"],
    ] as const) {
      expect(await refusedCreate({ filter_rules: rules })).toContain(path)
    }
    expect(await refusedCreate({ filter_rules: withRule({ field: "input", operator: "regex", value: "[" }) })).toContain(
      "not a valid regular expression",
    )
  })

  test("api_key_hashes: the caller's keys are accepted; an unknown hash or another user's key is 400 naming it", async () => {
    expect((await create({ api_key_hashes: [me.inference.hash] })).api_key_hashes).toEqual([me.inference.hash])
    expect(await refusedCreate({ api_key_hashes: [me.inference.hash, "0".repeat(64)] })).toContain("api_key_hashes[1]")
    expect(await refusedCreate({ api_key_hashes: [other.hash] })).toContain("api_key_hashes[0]")
  })

  test("workspace_id: one the caller administers is accepted; a plain member's is 403; another user's workspace is 404", async () => {
    const shared = await shareWorkspaceOfOther()
    expect((await create({ workspace_id: shared })).workspace_id).toBe(shared)
    const joined = await shareWorkspaceOfOther("member")
    const before = await listIds()
    const refused = await gw().fetch(PATH, { method: "POST", json: { name: "x", type: "langfuse", config: LANGFUSE, workspace_id: joined } })
    expect(await expectError(refused, 403)).toContain("Only admins of workspace")
    expect(await listIds()).toEqual(before)
    const res = await gw().fetch(PATH, {
      method: "POST",
      json: { name: "x", type: "langfuse", config: LANGFUSE, workspace_id: other.workspaceId },
    })
    await expectError(res, 404)
  })

  test("a secret of fewer than 16 characters is fully masked; a longer one shows only its last 4", async () => {
    const data = await create({ type: "ramp", config: { apiKey: "123456789012345" } })
    expect(data.config).toEqual({ apiKey: "****" })
    expect((await create({ type: "ramp", config: { apiKey: "1234567890123456" } })).config).toEqual({ apiKey: "****3456" })
  })

  test("a refused create stores nothing", async () => {
    const before = await listIds()
    await refusedCreate({ type: "datadog", config: { apiKey: "dd-api-key-0123456789" } })
    await refusedCreate({ sampling_rate: 2 })
    expect(await listIds()).toEqual(before)
  })

  test("an inference key is 403 with the management message; no credential is 401", async () => {
    const res = await gw().fetch(PATH, {
      method: "POST",
      json: { name: "x", type: "langfuse", config: LANGFUSE },
      key: me.inference.key,
    })
    expect(await expectError(res, 403)).toBe(MANAGEMENT_ONLY)
    await expectError(await gw().fetch(PATH, { method: "POST", json: {}, key: null }), 401)
  })
})

/** A workspace owned by the other user with me as a member, by default an admin (written directly: membership is another feature). */
const shareWorkspaceOfOther = (role: "admin" | "member" = "admin") =>
  run(
    Effect.gen(function* () {
      const sql = yield* SqlClient.SqlClient
      const id = crypto.randomUUID()
      const now = new Date().toISOString()
      yield* sql`INSERT INTO workspaces (id, owner_user_id, name, slug, description, is_default, created_by, created_at)
        VALUES (${id}, ${other.userId}, ${"Shared"}, ${`shared-${id.slice(0, 8)}`}, ${""}, 0, ${other.userId}, ${now})`
      yield* sql`INSERT INTO workspace_members (workspace_id, user_id, role, is_scim, created_at)
        VALUES (${id}, ${me.userId}, ${role}, 0, ${now})`
      return id
    }),
  )

const listIds = async (key?: string) =>
  ((await (await gw().fetch(PATH, { key })).json()) as { data: Array<{ id: string }> }).data.map((d) => d.id)

describe("secrets at rest", () => {
  test("the stored row holds no plaintext secret, only sealed values; the service decrypts them", async () => {
    const headers = { Authorization: "Bearer webhook-token-0123456789", "x-team": "core-team-header" }
    const lf = await create({ config: LANGFUSE })
    const hook = await create({ type: "webhook", config: { url: "https://hooks.example.com/x", headers } })
    const rows = await run(
      Effect.flatMap(SqlClient.SqlClient, (sql) =>
        sql<Record<string, unknown>>`SELECT * FROM observability_destinations WHERE ${sql.in("id", [lf.id, hook.id])}`,
      ),
    )
    expect(rows).toHaveLength(2)
    const raw = JSON.stringify(rows)
    for (const secret of [LANGFUSE.publicKey!, LANGFUSE.secretKey!, ...Object.values(headers)]) {
      expect(raw).not.toContain(secret)
      expect(raw).not.toContain(secret.slice(4, -4))
    }
    const stored = JSON.parse(String(rows.find((r) => r.id === lf.id)!.config)) as Record<string, string>
    expect(stored.publicKey).toStartWith("enc:v1:")
    expect(stored.secretKey).toStartWith("enc:v1:")
    expect(stored.baseUrl).toBe("https://cloud.langfuse.com")
    expect(await resolvedConfig(lf.id)).toEqual(LANGFUSE)
    expect(await resolvedConfig(hook.id)).toEqual({ url: "https://hooks.example.com/x", headers })
    expect(hook.config).toEqual({
      url: "https://hooks.example.com/x",
      headers: { Authorization: "****6789", "x-team": "****ader" },
    })
  })
})

describe("GET /observability/destinations/{id}", () => {
  test("answers {data: destination} with every required key and masked secrets", async () => {
    const made = await create({ name: "one" })
    const res = await gw().fetch(`${PATH}/${made.id}`)
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as DestinationBody
    expectShape(data, DESTINATION)
    expect(data).toEqual(made)
    expect(JSON.stringify(data)).not.toContain(LANGFUSE.secretKey!)
  })

  test("an id that is not a UUID, and an unknown UUID, are 404", async () => {
    await expectError(await gw().fetch(`${PATH}/not-a-uuid`), 404)
    await expectError(await gw().fetch(`${PATH}/${crypto.randomUUID()}`), 404)
  })

  test("another user's destination is 404, mine is 404 for them", async () => {
    const mine = await create({})
    const theirs = await create({}, other.key)
    await expectError(await gw().fetch(`${PATH}/${theirs.id}`), 404)
    await expectError(await gw().fetch(`${PATH}/${mine.id}`, { key: other.key }), 404)
  })

  test("an inference key is 403 with the management message; no credential is 401", async () => {
    const made = await create({})
    expect(await expectError(await gw().fetch(`${PATH}/${made.id}`, { key: me.inference.key }), 403)).toBe(MANAGEMENT_ONLY)
    await expectError(await gw().fetch(`${PATH}/${made.id}`, { key: null }), 401)
  })
})

describe("GET /observability/destinations (list)", () => {
  test("lists the destinations of the caller's workspaces only, secrets masked", async () => {
    const mine = await create({ name: "listed" })
    const theirs = await create({ name: "theirs" }, other.key)
    const res = await gw().fetch(PATH)
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as { data: Array<Record<string, unknown> & { id: string }> }
    for (const d of data) expectShape(d, DESTINATION)
    const ids = data.map((d) => d.id)
    expect(ids).toContain(mine.id)
    expect(ids).not.toContain(theirs.id)
    expect(JSON.stringify(data)).not.toContain(LANGFUSE.secretKey!)
    expect(data.find((d) => d.id === mine.id)).toEqual(mine)
    const theirIds = await listIds(other.key)
    expect(theirIds).toContain(theirs.id)
    expect(theirIds).not.toContain(mine.id)
  })

  test("workspace_id narrows the list; a workspace the caller cannot use is 404", async () => {
    const shared = await shareWorkspaceOfOther()
    const inShared = await create({ workspace_id: shared })
    const res = await gw().fetch(`${PATH}?workspace_id=${shared}`)
    const { data } = (await res.json()) as { data: Array<{ id: string }> }
    expect(data.map((d) => d.id)).toEqual([inShared.id])
    expect(await listIds()).toContain(inShared.id)
    await expectError(await gw().fetch(`${PATH}?workspace_id=${other.workspaceId}`), 404)
  })

  test("an inference key is 403 with the management message", async () => {
    expect(await expectError(await gw().fetch(PATH, { key: me.inference.key }), 403)).toBe(MANAGEMENT_ONLY)
  })
})

describe("PATCH /observability/destinations/{id}", () => {
  test("sending back the masked secret keeps the stored secret", async () => {
    const made = await create({})
    const res = await patch(made.id, { name: "renamed", config: made.config })
    expect(res.status).toBe(200)
    const { data } = (await res.json()) as DestinationBody
    expectShape(data, DESTINATION)
    expect(data.name).toBe("renamed")
    expect(data.config).toEqual(made.config)
    expect(await resolvedConfig(made.id)).toEqual(LANGFUSE)
  })

  test("a new secret replaces the old; config keys not sent are kept (merge)", async () => {
    const made = await create({})
    const res = await patch(made.id, { config: { secretKey: "sk-lf-brand-new-secret-9999" } })
    const { data } = (await res.json()) as DestinationBody
    expect(data.config).toEqual({ publicKey: "****EfGh", secretKey: "****9999", baseUrl: "https://cloud.langfuse.com" })
    expect(await resolvedConfig(made.id)).toEqual({ ...LANGFUSE, secretKey: "sk-lf-brand-new-secret-9999" })
  })

  test("null removes an optional config key; null on a required key is 400 and changes nothing", async () => {
    const made = await create({})
    const { data } = (await (await patch(made.id, { config: { baseUrl: null } })).json()) as DestinationBody
    expect(data.config).toEqual({ publicKey: "****EfGh", secretKey: "****wxyz" })
    expect(await expectError(await patch(made.id, { config: { secretKey: null } }), 400)).toContain("config.secretKey: is missing")
    expect(await resolvedConfig(made.id)).toEqual({ publicKey: LANGFUSE.publicKey, secretKey: LANGFUSE.secretKey })
  })

  test("headers: a masked value sent back keeps the stored value, a new value replaces it, an omitted header goes", async () => {
    const headers = { Authorization: "Bearer old-token-0123456789", "x-a": "value-a-0123456789", "x-b": "value-b-0123456789" }
    const made = await create({ type: "otel-collector", config: { endpoint: "https://otel.example.com", headers } })
    const shown = made.config.headers as Record<string, string>
    const res = await patch(made.id, { config: { headers: { Authorization: shown.Authorization, "x-a": "value-a-new-000000" } } })
    expect(res.status).toBe(200)
    expect(await resolvedConfig(made.id)).toEqual({
      endpoint: "https://otel.example.com",
      headers: { Authorization: headers.Authorization, "x-a": "value-a-new-000000" },
    })
  })

  test("updates the settings fields and updated_at", async () => {
    const made = await create({})
    await Bun.sleep(5)
    const sent = {
      enabled: false,
      privacy_mode: true,
      sampling_rate: 0,
      api_key_hashes: [me.inference.hash],
      filter_rules: { enabled: false, groups: [] },
      regions: ["us"],
      broadcast_generation_cost: false,
      broadcast_generation_identity: false,
      broadcast_generation_request_context: false,
    }
    const { data } = (await (await patch(made.id, sent)).json()) as DestinationBody
    expect(data).toMatchObject({ ...sent, created_at: made.created_at })
    expect(Date.parse(data.updated_at)).toBeGreaterThan(Date.parse(made.updated_at))
    const cleared = (await (await patch(made.id, { api_key_hashes: null, filter_rules: null, sampling_rate: 1 })).json()) as DestinationBody
    expect(cleared.data).toMatchObject({ api_key_hashes: null, filter_rules: null, sampling_rate: 1 })
  })

  test("changing the kind needs the new kind's config: without it 400 naming the key; with it the old secrets are gone", async () => {
    const made = await create({})
    expect(await expectError(await patch(made.id, { type: "datadog" }), 400)).toContain("config.apiKey: is missing")
    expect((await getOne(made.id)).type).toBe("langfuse")
    const res = await patch(made.id, { type: "datadog", config: KINDS.datadog!.config })
    const { data } = (await res.json()) as DestinationBody
    expect(data.type).toBe("datadog")
    expect(data.config).toEqual({ apiKey: mask(KINDS.datadog!.config.apiKey!), mlApp: "gateway" })
    expect(await resolvedConfig(made.id)).toEqual(KINDS.datadog!.config)
  })

  test("bad fields are 400 naming the field and change nothing", async () => {
    const made = await create({ sampling_rate: 0.5 })
    for (const [json, field] of [
      [{ sampling_rate: 1.01 }, "sampling_rate"],
      [{ sampling_rate: -0.01 }, "sampling_rate"],
      [{ name: "" }, "name"],
      [{ type: "splunk" }, "type"],
      [{ regions: ["mars"] }, "regions[0]"],
      [{ config: { publicKey: "" } }, "config.publicKey"],
      [{ config: { extra: "x" } }, "config.extra"],
      [{ api_key_hashes: [other.hash] }, "api_key_hashes[0]"],
      [{ name: "changed", filter_rules: { enabled: true, groups: [{ logic: "and", rules: [{ field: "model", operator: "regex", value: "(" }] }] } }, "filter_rules"],
      [{ name: "changed", config: { secretKey: "" } }, "config.secretKey"],
    ] as const) {
      expect(await expectError(await patch(made.id, json), 400)).toContain(field)
    }
    expect(await getOne(made.id)).toEqual(made)
    expect(await resolvedConfig(made.id)).toEqual(LANGFUSE)
  })

  test("sampling_rate 0 and 1 are accepted on update", async () => {
    const made = await create({})
    expect(((await (await patch(made.id, { sampling_rate: 0 })).json()) as DestinationBody).data.sampling_rate).toBe(0)
    expect(((await (await patch(made.id, { sampling_rate: 1 })).json()) as DestinationBody).data.sampling_rate).toBe(1)
  })

  test("another user's destination and an unknown id are 404; an inference key is 403", async () => {
    const theirs = await create({}, other.key)
    await expectError(await patch(theirs.id, { name: "mine now" }), 404)
    await expectError(await patch(crypto.randomUUID(), { name: "x" }), 404)
    const mine = await create({})
    expect(await expectError(await patch(mine.id, { name: "x" }, me.inference.key), 403)).toBe(MANAGEMENT_ONLY)
    expect((await getOne(mine.id)).name).toBe("dest")
  })
})

describe("receivers on private, loopback or metadata addresses (outbound.allow_private_addresses off)", () => {
  test("creation is refused with a 400 naming the setting and the rule, for every URL a kind takes", async () => {
    const cases: ReadonlyArray<[Record<string, unknown>, string]> = [
      [{ type: "webhook", config: { url: "http://127.0.0.1:9/in" } }, "config.url"],
      [{ type: "webhook", config: { url: "http://localhost:9/in" } }, "config.url"],
      [{ type: "otel-collector", config: { endpoint: "http://169.254.169.254/latest/meta-data/" } }, "config.endpoint"],
      [{ type: "langfuse", config: { ...LANGFUSE, baseUrl: "http://[::1]:3000" } }, "config.baseUrl"],
      [{ type: "clickhouse", config: { ...KINDS.clickhouse!.config, host: "10.0.0.5:8443" } }, "config.host"],
      [{ type: "sentry", config: { dsn: "https://k@o1.ingest.sentry.io/1", otlpEndpoint: "http://[::ffff:0:192.168.1.1]/otlp" } }, "config.otlpEndpoint"],
    ]
    const before = await listIds()
    for (const [json, field] of cases) {
      const message = await refusedCreate(json)
      expect([field, message]).toEqual([field, expect.stringContaining(`${field}: the host`)])
      expect(message).toContain("private or reserved address")
      expect(message).toContain("outbound.allow_private_addresses")
    }
    expect(await listIds()).toEqual(before)
  })

  test("an update to such a URL is refused and changes nothing; a public name still passes", async () => {
    const made = await create({ type: "webhook", config: { url: "https://hooks.example.com/in" } })
    const res = await patch(made.id, { config: { url: "http://127.0.0.1:8080/in" } })
    expect(await expectError(res, 400)).toContain("config.url: the host 127.0.0.1 resolves to a private or reserved address")
    expect(await resolvedConfig(made.id)).toEqual({ url: "https://hooks.example.com/in" })
    // A kind change that brings a private URL is refused the same way.
    const switched = await patch(made.id, { type: "otel-collector", config: { endpoint: "http://10.1.2.3:4318" } })
    expect(await expectError(switched, 400)).toContain("config.endpoint")
    expect((await getOne(made.id)).type).toBe("webhook")
  })
})

describe("who may change a destination", () => {
  test("a plain member of its workspace reads it, secrets masked, but may not change, test, redeliver or remove it (403, nothing changes)", async () => {
    const joined = await shareWorkspaceOfOther("member")
    const theirs = await create({ workspace_id: joined }, other.key)
    const seen = await getOne(theirs.id)
    expect(seen.config).toEqual(theirs.config)
    expect(JSON.stringify(seen)).not.toContain(LANGFUSE.secretKey!)
    const moved = await patch(theirs.id, { config: { baseUrl: "https://collector.example.net" } })
    expect(await expectError(moved, 403)).toContain("your role is member")
    for (const [method, suffix] of [
      ["DELETE", ""],
      ["POST", "/test"],
      ["POST", "/redeliver"],
    ] as const) {
      expect(await expectError(await gw().fetch(`${PATH}/${theirs.id}${suffix}`, { method }), 403)).toContain("Only admins of workspace")
    }
    expect(await resolvedConfig(theirs.id)).toEqual(LANGFUSE)
    expect(await listIds(other.key)).toContain(theirs.id)
  })

  test("a new receiver URL needs the secrets sent again: masked or omitted they are 400 naming the secret, and nothing changes", async () => {
    const made = await create({})
    const refused = await patch(made.id, { config: { ...made.config, baseUrl: "https://collector.example.net" } })
    expect(await expectError(refused, 400)).toMatch(/config\.(publicKey|secretKey): send the secret again to change where the destination sends \(baseUrl\)/)
    await expectError(await patch(made.id, { config: { baseUrl: "https://collector.example.net" } }), 400)
    expect(await resolvedConfig(made.id)).toEqual(LANGFUSE)
    // With the secrets given again it moves; one of them still masked is refused.
    const half = await patch(made.id, { config: { baseUrl: "https://collector.example.net", publicKey: LANGFUSE.publicKey, secretKey: made.config.secretKey } })
    expect(await expectError(half, 400)).toContain("config.secretKey")
    const given = { baseUrl: "https://collector.example.net", publicKey: LANGFUSE.publicKey, secretKey: LANGFUSE.secretKey }
    expect((await patch(made.id, { config: given })).status).toBe(200)
    expect(await resolvedConfig(made.id)).toEqual({ ...LANGFUSE, baseUrl: "https://collector.example.net" })
  })

  test("a webhook's stored header is not carried to a new URL unless sent again", async () => {
    const headers = { Authorization: "Bearer webhook-token-0123456789" }
    const made = await create({ type: "webhook", config: { url: "https://hooks.example.com/in", headers } })
    const refused = await patch(made.id, { config: { url: "https://hooks.example.net/other", headers: made.config.headers } })
    expect(await expectError(refused, 400)).toContain("config.headers.Authorization: send the secret again")
    expect((await patch(made.id, { config: { url: "https://hooks.example.net/other", headers } })).status).toBe(200)
  })
})

describe("DELETE /observability/destinations/{id}", () => {
  test("answers {deleted: true}; the destination is gone", async () => {
    const made = await create({})
    const res = await gw().fetch(`${PATH}/${made.id}`, { method: "DELETE" })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ deleted: true })
    await expectError(await gw().fetch(`${PATH}/${made.id}`), 404)
    await expectError(await gw().fetch(`${PATH}/${made.id}`, { method: "DELETE" }), 404)
    expect(await listIds()).not.toContain(made.id)
  })

  test("another user's destination is 404 and stays; an inference key is 403", async () => {
    const theirs = await create({}, other.key)
    await expectError(await gw().fetch(`${PATH}/${theirs.id}`, { method: "DELETE" }), 404)
    expect(await listIds(other.key)).toContain(theirs.id)
    const mine = await create({})
    const res = await gw().fetch(`${PATH}/${mine.id}`, { method: "DELETE", key: me.inference.key })
    expect(await expectError(res, 403)).toBe(MANAGEMENT_ONLY)
  })
})

describe("the encryption key", () => {
  const secretsLayer = (settings: Parameters<typeof testSettings>[0]) =>
    Secrets.Default.pipe(Layer.provide(GatewayConfig.layer(testSettings(settings))))
  const secretsWith = (settings: Parameters<typeof testSettings>[0]) =>
    Effect.runPromise(Effect.provide(Secrets, secretsLayer(settings)))

  test("without GATEWAY_SECRET_KEY, a key file is created (0600) on first start and reused by the next", async () => {
    const file = join(dataDir, SECRET_KEY_FILE)
    expect(existsSync(file)).toBe(true)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    const before = readFileSync(file, "utf8")
    const sealed = await run(Effect.map(Secrets, (s) => s.seal("a secret")))
    const again = await secretsWith({ dataDir })
    expect(again.open(sealed)).toEqual(Either.right("a secret"))
    expect(readFileSync(file, "utf8")).toBe(before)
  })

  test("a fresh data directory gets its own key: values sealed under another key do not open", async () => {
    const fresh = join(tmpdir(), `gw-secret-${crypto.randomUUID()}`)
    try {
      const sealer = await secretsWith({ dataDir: fresh })
      expect(existsSync(join(fresh, SECRET_KEY_FILE))).toBe(true)
      const sealed = await run(Effect.map(Secrets, (s) => s.seal("a secret")))
      expect(Either.isLeft(sealer.open(sealed))).toBe(true)
    } finally {
      rmSync(fresh, { recursive: true, force: true })
    }
  })

  test("processes started at once on a fresh data directory agree on one complete key and leave only the key file", async () => {
    const child = join(import.meta.dir, "../support/secret-race.ts")
    for (let round = 0; round < 2; round++) {
      const fresh = join(tmpdir(), `gw-secret-${crypto.randomUUID()}`)
      try {
        // Every process waits for the same instant, then creates or reads the key file.
        const at = Date.now() + 1500
        const outs = await Promise.all(
          Array.from({ length: 6 }, async () => {
            const proc = Bun.spawn([process.execPath, child, fresh, String(at)], { stdout: "pipe", stderr: "pipe" })
            return (await new Response(proc.stdout).text()).trim()
          }),
        )
        expect(outs[0]).toMatch(/^[0-9a-f]{64}$/)
        expect(new Set(outs).size).toBe(1)
        expect(readdirSync(fresh)).toEqual([SECRET_KEY_FILE])
      } finally {
        rmSync(fresh, { recursive: true, force: true })
      }
    }
  })

  test("GATEWAY_SECRET_KEY, when set, is the key: no file is written, and only the same key opens", async () => {
    const fresh = join(tmpdir(), `gw-secret-${crypto.randomUUID()}`)
    const alpha = await secretsWith({ dataDir: fresh, secretKey: Option.some(Redacted.make("alpha")) })
    const beta = await secretsWith({ dataDir: fresh, secretKey: Option.some(Redacted.make("beta")) })
    const alphaAgain = await secretsWith({ dataDir: fresh, secretKey: Option.some(Redacted.make("alpha")) })
    expect(existsSync(fresh)).toBe(false)
    const sealed = alpha.seal("hunter2-hunter2")
    expect(sealed).toStartWith("enc:v1:")
    expect(sealed).not.toContain("hunter2")
    expect(alpha.seal("hunter2-hunter2")).not.toBe(sealed) // a random IV per value
    expect(alphaAgain.open(sealed)).toEqual(Either.right("hunter2-hunter2"))
    expect(Either.isLeft(beta.open(sealed))).toBe(true)
    // Tampering is detected: one character changed well inside the body (every bit of it counts;
    // the last characters of base64url carry padding bits, and "xx" there decoded to the same
    // byte about once in 256 runs).
    const at = sealed.length - 10
    const tampered = `${sealed.slice(0, at)}${sealed[at] === "A" ? "B" : "A"}${sealed.slice(at + 1)}`
    expect(tampered).not.toBe(sealed)
    expect(Either.isLeft(alpha.open(tampered))).toBe(true)
  })

  test("an empty GATEWAY_SECRET_KEY stops start-up with a message", async () => {
    const failed = await Effect.runPromise(
      Effect.flip(Effect.provide(Secrets, secretsLayer({ secretKey: Option.some(Redacted.make(" ")) }))),
    )
    expect(failed.message).toContain("GATEWAY_SECRET_KEY")
  })
})
