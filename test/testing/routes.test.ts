/**
 * One route table, two front doors: the same requests through `Bun.serve` (a socket) and through
 * the test kit's in-process dispatcher reach the same handlers and get the same answers.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Option, Redacted } from "effect"
import { GatewayConfig, testSettings } from "../../src/config/Config.js"
import { type Gateway, makeGateway } from "../../src/http/server.js"
import { routeDispatcher } from "../../src/testing/routes.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { TEST_METRICS_TOKEN } from "../support/gateway.js"

let db: TestDatabase
let gateway: Gateway
let server: ReturnType<typeof Bun.serve>
let dispatch: (req: Request) => Promise<Response>
let admin: string

beforeAll(async () => {
  db = await freshDatabase()
  gateway = await makeGateway(GatewayConfig.layer(testSettings({ databaseUrl: db.url, metricsToken: Redacted.make(TEST_METRICS_TOKEN) })))
  server = Bun.serve({ port: 0, hostname: "127.0.0.1", routes: gateway.table.routes, fetch: gateway.table.fetch, error: gateway.table.error })
  gateway.bind(server)
  dispatch = routeDispatcher(gateway.table)
  admin = Option.getOrThrow(gateway.createdSecret)
})

afterAll(async () => {
  await server.stop(true)
  await gateway.runtime.dispose()
  await db.drop()
})

type Case = readonly [method: string, path: string, init?: { readonly headers?: Record<string, string>; readonly body?: string }]

const cases: ReadonlyArray<Case> = [
  ["GET", "/v1/models"],
  ["GET", "/v1/models/demo/echo"],
  ["GET", "/v1/models/demo%2Fecho"],
  ["GET", "/v1/models/demo/echo/extra"],
  ["GET", "/v1/key"],
  ["GET", "/v1/keys"],
  ["GET", "/v1/keys/"],
  ["GET", "/v1/keys/0000000000000000000000000000000000000000000000000000000000000000"],
  ["DELETE", "/v1/keys/nope"],
  ["PUT", "/v1/keys"],
  ["GET", "/v1/responses"],
  ["DELETE", "/v1/chat/completions"],
  ["POST", "/v1/responses", { headers: { "content-type": "text/plain" }, body: "hi" }],
  ["POST", "/v1/responses", { headers: { "content-type": "application/json" }, body: "{" }],
  ["POST", "/v1/responses", { headers: { "content-type": "application/json" }, body: JSON.stringify({ model: "demo/nope", input: "x" }) }],
  ["POST", "/v1/messages/count_tokens", { headers: { "content-type": "application/json" }, body: "{}" }],
  ["POST", "/v1/embeddings", { headers: { "content-type": "application/json" }, body: "{}" }],
  ["GET", "/v1/openapi.json"],
  ["GET", "/metrics"],
  ["GET", "/nope"],
  ["GET", "/"],
  ["OPTIONS", "/v1/responses", { headers: { origin: "https://app.example", "access-control-request-method": "POST" } }],
  ["OPTIONS", "/v1/keys", { headers: { origin: "https://app.example", "access-control-request-method": "GET" } }],
  ["GET", "/console"],
  ["GET", "/console/"],
  ["GET", "/console/assets/none.js"],
  ["GET", "/v1/generation?id=gen-nope"],
  ["GET", "/v1/activity"],
]

/** What a client can tell of an answer: status, the headers that route-dependent code sets, and the body without ids. */
const seen = async (res: Response) => ({
  status: res.status,
  allow: res.headers.get("allow"),
  type: res.headers.get("content-type"),
  cors: res.headers.get("access-control-allow-methods"),
  body: (await res.text()).replace(/"(id|request_id|created_at|created)":\s*("[^"]*"|\d+)/g, '"$1":_').replace(/\d{10,}/g, "_"),
})

describe("Bun.serve and the in-process dispatcher route alike", () => {
  for (const [i, [method, path, init]] of cases.entries()) {
    test(`${i}: ${method} ${path}${init?.body === undefined ? "" : ` ${init.body.slice(0, 20)}`}`, async () => {
      const headers = { authorization: `Bearer ${admin}`, ...init?.headers }
      const viaSocket = await fetch(`http://127.0.0.1:${server.port}${path}`, { method, headers, body: init?.body })
      const inProcess = await dispatch(new Request(`http://gateway.test${path}`, { method, headers, body: init?.body }))
      expect(await seen(inProcess)).toEqual(await seen(viaSocket))
    })
  }
})
