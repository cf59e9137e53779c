import { describe, expect, test } from "bun:test"
import { FetchHttpClient, HttpApiClient, HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect } from "effect"
import { GatewayApi } from "../../src/http/Api.js"
import { expectError, useGateway } from "../support/gateway.js"

const gw = useGateway({ maxBodyBytes: 1024 })

describe("the front door", () => {
  test("GET /v1/health answers without credentials", async () => {
    const res = await gw().fetch("/v1/health", { key: null })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ status: "ok" })
  })

  test("GET /v1/ready says the store is reachable", async () => {
    const res = await gw().fetch("/v1/ready", { key: null })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { status: string; store: string }
    expect(body.status).toBe("ready")
    expect(["sqlite", "postgres"]).toContain(body.store)
  })

  test("an unknown path is 404 in the envelope", async () => {
    expect(await expectError(await gw().fetch("/v1/nothing-here"), 404)).toContain("/v1/nothing-here")
    await expectError(await gw().fetch("/"), 404)
    // A served path with a trailing slash is not served: 404, not a 405 naming methods that would not answer it.
    const slashed = await gw().fetch("/v1/keys/0123abcd/")
    expect(await expectError(slashed, 404)).toContain("No such endpoint: GET /v1/keys/0123abcd/")
    expect(slashed.headers.get("allow")).toBeNull()
  })

  test("a wrong method is 405 in the envelope with Allow", async () => {
    const res = await gw().fetch("/v1/keys", { method: "PUT" })
    expect(res.headers.get("allow")).toBe("GET, POST")
    await expectError(res, 405)
    await expectError(await gw().fetch("/v1/responses"), 405)
  })

  test("malformed JSON is 400", async () => {
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      body: "{not json",
      headers: { "content-type": "application/json" },
    })
    expect(await expectError(res, 400)).toContain("JSON")
  })

  test("a non-JSON content type is 415 on both planes", async () => {
    for (const path of ["/v1/keys", "/v1/responses"]) {
      const res = await gw().fetch(path, { method: "POST", body: "name=x", headers: { "content-type": "text/plain" } })
      await expectError(res, 415)
    }
  })

  test("a body over the maximum is 413 by Content-Length, and chunked without reading it all", async () => {
    const big = JSON.stringify({ name: "x".repeat(2000) })
    for (const path of ["/v1/keys", "/v1/responses"]) {
      await expectError(await gw().fetch(path, { method: "POST", body: big, headers: { "content-type": "application/json" } }), 413)
    }
    let pulled = 0
    const chunked = new ReadableStream<Uint8Array>({
      pull(controller) {
        pulled++
        if (pulled > 1000) return controller.close()
        controller.enqueue(new TextEncoder().encode("x".repeat(512)))
      },
    })
    const res = await gw().fetch("/v1/keys", {
      method: "POST",
      body: chunked,
      headers: { "content-type": "application/json" },
      duplex: "half",
    } as RequestInit)
    await expectError(res, 413)
  })

  test("POST /v1/responses reads a body by Content-Length and chunked alike (UTF-8, a BOM dropped), and caps both", async () => {
    const json = JSON.stringify({ model: "demo/echo", input: "héllo 👋 wörld", provider: { order: ["fake"] } })
    const bytes = new Uint8Array([0xef, 0xbb, 0xbf, ...new TextEncoder().encode(json)])
    const chunkedOf = (body: Uint8Array, size: number) => {
      let at = 0
      return new ReadableStream<Uint8Array>({
        pull(controller) {
          if (at >= body.length) return controller.close()
          // Cut anywhere, inside a character too.
          controller.enqueue(body.slice(at, at + size))
          at += size
        },
      })
    }
    const send = (body: BodyInit) =>
      gw().fetch("/v1/responses", { method: "POST", body, headers: { "content-type": "application/json" }, duplex: "half" } as RequestInit)
    const texts: Array<string> = []
    for (const body of [bytes, chunkedOf(bytes, 7)]) {
      const res = await send(body)
      expect(res.status).toBe(200)
      const result = (await res.json()) as { output: Array<{ content: Array<{ text: string }> }> }
      texts.push(result.output[0]!.content[0]!.text)
    }
    expect(texts).toEqual(["Echo: héllo 👋 wörld", "Echo: héllo 👋 wörld"])
    const over = new TextEncoder().encode(JSON.stringify({ model: "demo/echo", input: "x".repeat(2000) }))
    await expectError(await send(chunkedOf(over, 256)), 413)
  })

  test("a body at the maximum passes the size check", async () => {
    const name = "y".repeat(1024 - JSON.stringify({ name: "" }).length)
    const body = JSON.stringify({ name })
    expect(body.length).toBe(1024)
    const res = await gw().fetch("/v1/keys", { method: "POST", body, headers: { "content-type": "application/json" } })
    // Past the size check the name rule applies (at most 256 characters).
    expect(await expectError(res, 400)).toContain("name")
  })

  test("GET /v1/openapi.json documents the control plane", async () => {
    const res = await gw().fetch("/v1/openapi.json", { key: null })
    const doc = (await res.json()) as { openapi: string; paths: Record<string, unknown> }
    expect(doc.openapi).toStartWith("3.")
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(["/v1/keys", "/v1/keys/{hash}", "/v1/key", "/v1/credits"]))
  })

  test("POST /v1/responses authenticates on the data plane with the same envelope", async () => {
    await expectError(await gw().fetch("/v1/responses", { method: "POST", json: {}, key: null }), 401)
    await expectError(await gw().fetch("/v1/responses", { method: "POST", json: {}, key: "sk-gw-v1-wrong" }), 401)
  })
})

describe("the typed client", () => {
  test("creates, reads and deletes a key through HttpApiClient", async () => {
    const program = Effect.gen(function* () {
      const client = yield* HttpApiClient.make(GatewayApi, {
        baseUrl: gw().url,
        transformClient: HttpClient.mapRequest(HttpClientRequest.bearerToken(gw().adminKey)),
      })
      const created = yield* client.keys.create({ payload: { name: "typed", limit: 1 } })
      const got = yield* client.keys.get({ path: { hash: created.data.hash } })
      const missing = yield* Effect.flip(client.keys.get({ path: { hash: "nope" } }))
      yield* client.keys.delete({ path: { hash: created.data.hash } })
      return { created, got, missing }
    })
    const { created, got, missing } = await Effect.runPromise(Effect.provide(program, FetchHttpClient.layer))
    expect(created.key).toStartWith("sk-gw-v1-")
    expect(got.data.name).toBe("typed")
    expect(got.data.limit).toBe(1)
    expect(missing._tag).toBe("NotFound")
  })
})
