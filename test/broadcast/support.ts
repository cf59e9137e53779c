/** Loopback receivers for broadcast tests, and helpers to set a workspace's broadcast switch. */
import { afterEach, test as bunTest, expect } from "bun:test"
import type { TestGateway } from "../support/gateway.js"

/** What these helpers use of a gateway, over a socket or in-process. */
type Gateway = Pick<TestGateway, "fetch">

/** Postgres: a database per gateway, created and dropped, takes seconds (a timeout per test: setDefaultTimeout would reach other files). */
export const TIMEOUT_MS = 30_000
export const test = (name: string, fn: () => Promise<void> | void, timeout = TIMEOUT_MS) => bunTest(name, fn, timeout)

export interface Received {
  readonly method: string
  readonly path: string
  readonly headers: Headers
  readonly body: string
}

export interface Receiver {
  readonly url: string
  readonly port: number
  readonly received: Array<Received>
  /** The status the next requests get (200 by default); `retryAfter` adds a Retry-After header. */
  respond: (status: number, retryAfter?: string) => void
  readonly stop: () => void
}

export const startReceiver = (port = 0): Receiver => {
  const received: Array<Received> = []
  let status = 200
  let retryAfter: string | undefined
  const server = Bun.serve({
    port,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      received.push({ method: req.method, path: new URL(req.url).pathname, headers: req.headers, body: await req.text() })
      return new Response(status < 300 ? "{}" : "receiver secret body", {
        status,
        headers: retryAfter === undefined ? {} : { "retry-after": retryAfter },
      })
    },
  })
  return {
    url: `http://127.0.0.1:${server.port}`,
    port: server.port as number,
    received,
    respond: (s, after) => {
      status = s
      retryAfter = after
    },
    stop: () => void server.stop(true),
  }
}

/** Resolves once `check()` is true (polling every 50 ms), or fails after `ms`. */
export const waitFor = async (check: () => boolean | Promise<boolean>, ms = 10_000, what = "the condition"): Promise<void> => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await check()) return
    await Bun.sleep(50)
  }
  throw new Error(`timed out waiting for ${what}`)
}

export const workspaceOf = async (gw: Gateway) =>
  ((await (await gw.fetch("/v1/key")).json()) as { data: { workspace_id: string } }).data.workspace_id

export const setBroadcast = async (gw: Gateway, enabled: boolean) => {
  const id = await workspaceOf(gw)
  const res = await gw.fetch(`/v1/workspaces/${id}`, { method: "PATCH", json: { is_observability_broadcast_enabled: enabled } })
  expect(res.status).toBe(200)
  return id
}

export const createDestination = async (gw: Gateway, body: Record<string, unknown>) => {
  const res = await gw.fetch("/v1/observability/destinations", { method: "POST", json: body })
  const json = (await res.json()) as { data: { id: string } }
  if (res.status !== 201) throw new Error(`create: ${res.status} ${JSON.stringify(json)}`)
  return json.data.id
}

/**
 * Destinations made through the returned function, deleted after each test, when the receiver's
 * log is also cleared and its status set back to 200.
 */
export const useDestinations = (gw: () => Gateway, receiver: Receiver) => {
  const made: Array<string> = []
  afterEach(async () => {
    for (const id of made.splice(0)) await gw().fetch(`/v1/observability/destinations/${id}`, { method: "DELETE" })
    receiver.received.length = 0
    receiver.respond(200)
  }, TIMEOUT_MS)
  return async (body: Record<string, unknown>) => {
    const id = await createDestination(gw(), body)
    made.push(id)
    return id
  }
}

/**
 * What a test started (gateways, receivers, databases), stopped when it ends, the last first:
 * kept to the file's end, a file's gateways (each a pool, a listener and a delivery Worker's pool)
 * held ~64 Postgres connections at once, and a Worker left running shared the next test's threads.
 */
export const useCleanups = (timeoutMs = TIMEOUT_MS) => {
  const cleanups: Array<() => Promise<void> | void> = []
  afterEach(async () => {
    for (let c = cleanups.pop(); c !== undefined; c = cleanups.pop()) await c()
  }, timeoutMs)
  return cleanups
}

export const ask = async (gw: Gateway, body: Record<string, unknown>, key?: string) => {
  const res = await gw.fetch("/v1/responses", { method: "POST", json: { model: "demo/free", ...body }, ...(key === undefined ? {} : { key }) })
  expect(res.status).toBe(200)
  await res.text()
  return res.headers.get("x-generation-id") as string
}

interface OtlpAttribute {
  readonly key: string
  readonly value: Record<string, unknown>
}
export interface OtlpSpan {
  readonly traceId: string
  readonly spanId: string
  readonly parentSpanId?: string
  readonly name: string
  readonly attributes: ReadonlyArray<OtlpAttribute>
}
interface OtlpBody {
  readonly resourceSpans: ReadonlyArray<{
    readonly resource: { readonly attributes: ReadonlyArray<OtlpAttribute> }
    readonly scopeSpans: ReadonlyArray<{ readonly scope: { readonly name: string }; readonly spans: ReadonlyArray<OtlpSpan> }>
  }>
}

export const spansIn = (body: string): Array<OtlpSpan> =>
  (JSON.parse(body) as OtlpBody).resourceSpans.flatMap((r) => r.scopeSpans.flatMap((s) => s.spans))

export const resourceOf = (body: string) => (JSON.parse(body) as OtlpBody).resourceSpans[0]?.resource

/** An attribute's value as a plain JS value (string, number, boolean, or array of them). */
export const attr = (span: OtlpSpan, key: string): unknown => {
  const a = span.attributes.find((x) => x.key === key)
  if (a === undefined) return undefined
  return plain(a.value)
}

const plain = (v: Record<string, unknown>): unknown => {
  if ("stringValue" in v) return v.stringValue
  if ("intValue" in v) return Number(v.intValue)
  if ("doubleValue" in v) return Number(v.doubleValue)
  if ("boolValue" in v) return v.boolValue
  if ("arrayValue" in v) return ((v.arrayValue as { values?: Array<Record<string, unknown>> }).values ?? []).map(plain)
  return undefined
}

/** Every root span (no parent among the generation spans) the receiver got, keyed by gen_ai.response.id. */
export const rootsBy = (received: ReadonlyArray<Received>): Map<string, OtlpSpan> => {
  const out = new Map<string, OtlpSpan>()
  for (const r of received) {
    for (const s of spansIn(r.body)) {
      if (attr(s, "gateway.attempt.index") !== undefined) continue
      out.set(attr(s, "gen_ai.response.id") as string, s)
    }
  }
  return out
}
