/** Starts the real server in-process on a free port over a fresh database (see db.ts). */
import { afterAll, beforeAll } from "bun:test"
import { Option, Redacted } from "effect"
import { GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { type GatewayOptions, type RunningServer, type ServerOptions, startServer } from "../../src/http/server.js"
import { startInProcess } from "../../src/testing/gateway.js"
import { freshDatabase, type TestDatabase } from "./db.js"

/** The bearer token test gateways serve GET /metrics with (a gateway without a token refuses it). */
export const TEST_METRICS_TOKEN = "test-metrics-token-0123456789"
export const metricsAuth = { authorization: `Bearer ${TEST_METRICS_TOKEN}` }

export interface TestGateway {
  readonly url: string
  readonly server: RunningServer
  /** The first management key, created at start. */
  readonly adminKey: string
  readonly fetch: (path: string, init?: RequestInit & { key?: string | null; json?: unknown }) => Promise<Response>
}

export const startTestGateway = async (
  overrides: Partial<Settings> = {},
  serverOptions: ServerOptions = {},
): Promise<TestGateway & { stop: () => Promise<void> }> => {
  // A caller that brings its own database keeps it (and drops it): none is made here then, so
  // none is left behind (an unused Postgres database per CI run, before).
  const db: TestDatabase = overrides.databaseUrl === undefined ? await freshDatabase() : { url: overrides.databaseUrl, drop: async () => {} }
  const server = await startServer(GatewayConfig.layer(testSettings({ databaseUrl: db.url, metricsToken: Redacted.make(TEST_METRICS_TOKEN), ...overrides })), serverOptions)
  // A given management key (a restart on the same database) is the admin key; else the one made at start.
  const given = overrides.managementKey ?? Option.none()
  const adminKey = Option.isSome(given) ? Redacted.value(given.value) : Option.getOrThrow(server.createdSecret)
  const base = server.url
  return {
    url: base,
    server,
    adminKey,
    fetch: (path, init = {}) => {
      const headers = new Headers(init.headers)
      const key = init.key === undefined ? adminKey : init.key
      if (key !== null) headers.set("authorization", `Bearer ${key}`)
      let body = init.body
      if (init.json !== undefined) {
        headers.set("content-type", "application/json")
        body = JSON.stringify(init.json)
      }
      return fetch(`${base}${path}`, { ...init, headers, body })
    },
    stop: async () => {
      await server.stop()
      await db.drop()
    },
  }
}

/** One gateway, from `start`, for the whole test file. */
const useStarted = <G extends { stop: () => Promise<void> }>(start: () => Promise<G>) => {
  const ref = {} as { current: G }
  beforeAll(async () => {
    ref.current = await start()
  })
  afterAll(async () => {
    await ref.current?.stop()
  })
  return () => ref.current
}

/** One gateway for the whole test file. */
export const useGateway = (overrides: Partial<Settings> = {}) => useStarted(() => startTestGateway(overrides))

/** What tests of the pipeline use of a gateway, with no socket: the kit's in-process gateway (src/testing/). */
export interface InProcessGateway {
  /** The first management key, created at start. */
  readonly adminKey: string
  readonly fetch: TestGateway["fetch"]
  /** The kit's client (its `fetch` binds an SDK in-process) and its scripted provider. */
  readonly client: Awaited<ReturnType<typeof startInProcess>>
  readonly server: Pick<RunningServer, "runtime" | "settings" | "drain" | "metrics">
}

/** A gateway in-process over a fresh database (Postgres when the suite runs on it), on the real clock. */
export const startInProcessGateway = async (
  overrides: Partial<Settings> = {},
  serverOptions: Pick<ServerOptions, "formats"> & Pick<GatewayOptions, "destinationKinds"> = {},
): Promise<InProcessGateway & { stop: () => Promise<void> }> => {
  const db: TestDatabase = overrides.databaseUrl === undefined ? await freshDatabase() : { url: overrides.databaseUrl, drop: async () => {} }
  const kit = await startInProcess({ databaseUrl: db.url, settings: { metricsToken: Redacted.make(TEST_METRICS_TOKEN), ...overrides }, ...serverOptions })
  const given = overrides.managementKey ?? Option.none()
  const adminKey = Option.isSome(given) ? Redacted.value(given.value) : kit.adminKey
  return {
    adminKey,
    client: kit,
    fetch: (path, init = {}) => {
      const { key, json, ...rest } = init
      return kit.request(path, { ...rest, key: key === undefined ? adminKey : key, json })
    },
    server: {
      runtime: kit.runtime,
      settings: kit.settings,
      metrics: kit.gateway.metrics,
      drain: kit.drain,
    },
    stop: async () => {
      await kit.stop()
      await db.drop()
    },
  }
}

/** One in-process gateway for the whole test file. */
export const useInProcessGateway = (overrides: Partial<Settings> = {}) => useStarted(() => startInProcessGateway(overrides))

/** Asserts the spec's error envelope with an integer code equal to the status; returns the message. */
export const expectError = async (res: Response, status: number): Promise<string> => {
  const body = (await res.json()) as { error?: { code?: unknown; message?: unknown } }
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(body)}`)
  if (typeof body.error?.code !== "number" || body.error.code !== status || typeof body.error.message !== "string") {
    throw new Error(`not the error envelope: ${JSON.stringify(body)}`)
  }
  if (!("user_id" in body)) throw new Error(`envelope without user_id: ${JSON.stringify(body)}`)
  return body.error.message
}
