/**
 * A destination's config on its way in and out: header names and values fetch would refuse are a
 * 400 at create and update (not a 201 whose every delivery fails), and what a read shows of a
 * secret is at most its last 4 characters, URLs without their credentials; sent back as shown,
 * it keeps the stored secret.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect, Either, Option } from "effect"
import { decodeConfig, mask, maskConfig, maskUrl, mergeConfig } from "../../src/domain/destinations.js"
import { Destinations } from "../../src/services/Destinations.js"
import { kindOf, refusal } from "../broadcast/exporters-support.js"
import { expectError, useGateway } from "../support/gateway.js"

const withHeaders = (headers: Record<string, string>) => ({ url: "https://hooks.example.com/in", headers })

describe("config.headers: names and values fetch would refuse", () => {
  test("a name that is not an RFC 7230 token is 400 naming config.headers.<name>", () => {
    for (const name of ["x team", "x:team", "x-tëam", "x(team)", ""]) {
      expect(refusal("webhook", withHeaders({ [name]: "v" }))).toStartWith(`Invalid request: config.headers.${name}: `)
    }
    expect(refusal("webhook", withHeaders({ "x team": "v" }))).toContain("is not a valid header name")
    expect(refusal("webhook", withHeaders({ [`x-${"a".repeat(300)}`]: "v" }))).toContain("at most 256 characters")
  })

  test("a value with CR, LF or NUL, or beyond Latin-1, is 400 naming config.headers.<name>", () => {
    for (const value of ["a\r\nX-Injected: 1", "a\nb", "a\rb", "a\0b"]) {
      expect(refusal("otel-collector", { endpoint: "https://otel.example.com", headers: { "x-team": value } })).toBe(
        "Invalid request: config.headers.x-team: must not contain CR, LF or NUL",
      )
    }
    expect(refusal("webhook", withHeaders({ "x-team": "équipe ✓" }))).toContain("config.headers.x-team: must be Latin-1 text")
  })

  test("framing and hop-by-hop headers are refused in any case, saying the gateway sets them", () => {
    for (const name of ["Host", "content-length", "Transfer-Encoding", "CONNECTION", "keep-alive", "Upgrade", "TE", "trailer"]) {
      expect(refusal("webhook", withHeaders({ [name]: "x" }))).toBe(`Invalid request: config.headers.${name}: is set by the gateway for each request: remove it`)
    }
  })

  test("ordinary headers are accepted, and fetch takes them", () => {
    const headers = { Authorization: "Bearer token-0123456789", "X-Team_ID.v2": "core, eu", "x-latin": "café" }
    expect(Either.isRight(decodeConfig(kindOf("webhook"), withHeaders(headers)))).toBe(true)
    expect(Either.isRight(decodeConfig(kindOf("otel-collector"), { endpoint: "https://otel.example.com", headers }))).toBe(true)
    expect(() => new Headers(headers)).not.toThrow()
  })
})

describe("masking: at most the last 4 characters of a secret of 16 or more", () => {
  test("shorter secrets show nothing; longer ones only their last 4", () => {
    expect(mask("123456789")).toBe("****")
    expect(mask("123456789012345")).toBe("****")
    expect(mask("1234567890123456")).toBe("****3456")
    expect(mask("")).toBe("****")
  })

  test("header values are masked the same way: a short bearer token shows nothing", () => {
    const config = { url: "https://hooks.example.com/in", headers: { Authorization: "Bearer xyz", "x-key": "k-0123456789abcdefWXYZ" } }
    expect(maskConfig(kindOf("webhook"), config)).toEqual({
      url: "https://hooks.example.com/in",
      headers: { Authorization: "****", "x-key": "****WXYZ" },
    })
  })

  test("a URL shows no password, no lone user name, and no secret-looking query value", () => {
    expect(maskUrl("https://user:hunter2@hooks.example.com/in")).toBe("https://user:****@hooks.example.com/in")
    expect(maskUrl("https://sk-live-0123456789abcdef@hooks.example.com/")).toBe("https://****cdef@hooks.example.com/")
    expect(maskUrl("https://hooks.example.com/in?team=core&api_key=abc123&X-Amz-Signature=0123456789abcdef0123")).toBe(
      "https://hooks.example.com/in?team=core&api_key=****&X-Amz-Signature=****0123",
    )
    expect(maskUrl("https://hooks.example.com/in?team=core")).toBe("https://hooks.example.com/in?team=core")
    expect(maskUrl("gateway")).toBe("gateway")
    const config = { endpoint: "https://writer:ch-pass-0123@otel.example.com/v1/traces?token=t0k" }
    expect(maskConfig(kindOf("otel-collector"), config)).toEqual({ endpoint: "https://writer:****@otel.example.com/v1/traces?token=****" })
  })

  test("a value sent back as it was shown, in this format or the earlier one, keeps the stored value", () => {
    const webhook = kindOf("webhook")
    const stored = {
      url: "https://user:hunter2@hooks.example.com/in?token=abc",
      headers: { Authorization: "Bearer webhook-token-0123456789", "x-short": "short" },
    }
    const shown = maskConfig(webhook, stored)
    expect(mergeConfig(webhook, stored, shown)).toEqual(stored)
    expect(mergeConfig(webhook, stored, { headers: { Authorization: "Bear...6789", "x-short": "********" } })).toEqual(stored)
    const changed = { url: "https://user:****@hooks.example.com/other", headers: { Authorization: "****", "x-short": "new" } }
    expect(mergeConfig(webhook, stored, changed)).toEqual(changed)
    const langfuse = kindOf("langfuse")
    const keys = { publicKey: "pk-lf-1234567890EfGh", secretKey: "sk-lf-0987654321wxyz" }
    expect(mergeConfig(langfuse, keys, maskConfig(langfuse, keys))).toEqual(keys)
    expect(mergeConfig(langfuse, keys, { publicKey: "pk-l...EfGh", secretKey: "sk-new" })).toEqual({ ...keys, secretKey: "sk-new" })
  })
})

describe("through the API", () => {
  const dataDir = join(tmpdir(), `gw-destination-safety-${crypto.randomUUID()}`)
  afterAll(() => rmSync(dataDir, { recursive: true, force: true }))
  const gw = useGateway({ dataDir })
  const PATH = "/v1/observability/destinations"
  type Body = { data: { id: string; config: Record<string, unknown> } }

  let hookId = ""
  const secret = {
    url: "https://hooks:hunter2-0123456789@hooks.example.com/in?sig=0123456789abcdef0123",
    headers: { Authorization: "Bearer xyz", "x-api-key": "key-0123456789abcdefWXYZ" },
  }
  beforeAll(async () => {
    const res = await gw().fetch(PATH, { method: "POST", json: { name: "hook", type: "webhook", config: secret } })
    expect(res.status).toBe(201)
    hookId = ((await res.json()) as Body).data.id
  })

  const stored = async (id: string) =>
    gw().server.runtime.runPromise(Effect.map(Effect.flatMap(Destinations, (d) => d.resolved(id)), (r) => Option.getOrThrow(r).config))

  test("GET shows no secret but the last 4 characters of long ones", async () => {
    const { data } = (await (await gw().fetch(`${PATH}/${hookId}`)).json()) as Body
    expect(data.config).toEqual({
      url: "https://hooks:****6789@hooks.example.com/in?sig=****0123",
      headers: { Authorization: "****", "x-api-key": "****WXYZ" },
    })
  })

  test("PATCH with the config as GET showed it keeps every stored secret", async () => {
    const { data } = (await (await gw().fetch(`${PATH}/${hookId}`)).json()) as Body
    const res = await gw().fetch(`${PATH}/${hookId}`, { method: "PATCH", json: { name: "renamed", config: data.config } })
    expect(res.status).toBe(200)
    expect(((await res.json()) as Body).data.config).toEqual(data.config)
    expect(await stored(hookId)).toEqual(secret)
  })

  test("a bad header is 400 naming it at create and at update, and changes nothing", async () => {
    const create = await gw().fetch(PATH, {
      method: "POST",
      json: { name: "bad", type: "webhook", config: { url: "https://hooks.example.com/in", headers: { "x team": "v" } } },
    })
    expect(await expectError(create, 400)).toContain("config.headers.x team: is not a valid header name")
    const update = await gw().fetch(`${PATH}/${hookId}`, {
      method: "PATCH",
      json: { config: { headers: { "x-team": "a\r\nX-Injected: 1" } } },
    })
    expect(await expectError(update, 400)).toBe("Invalid request: config.headers.x-team: must not contain CR, LF or NUL")
    const host = await gw().fetch(`${PATH}/${hookId}`, { method: "PATCH", json: { config: { headers: { Host: "evil.example" } } } })
    expect(await expectError(host, 400)).toContain("config.headers.Host: is set by the gateway")
    expect(await stored(hookId)).toEqual(secret)
  })

  test("a hostile filter regex is 400 naming its path at create and at update", async () => {
    const rules = { enabled: true, groups: [{ logic: "and", rules: [{ field: "input", operator: "regex", value: "(a|aa)+$" }] }] }
    const create = await gw().fetch(PATH, {
      method: "POST",
      json: { name: "re", type: "webhook", config: { url: "https://hooks.example.com/in" }, filter_rules: rules },
    })
    expect(await expectError(create, 400)).toContain("filter_rules.groups[0].rules[0].value: quantifies a group with alternatives")
    const update = await gw().fetch(`${PATH}/${hookId}`, { method: "PATCH", json: { filter_rules: rules } })
    expect(await expectError(update, 400)).toContain("filter_rules.groups[0].rules[0].value")
  })
})
