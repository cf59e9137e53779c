/**
 * The whole gateway in a test, without a socket (docs/testing.md): the same program and route table
 * `startServer` serves, over a temporary SQLite file (or a given Postgres URL), a catalog given
 * inline, `FakeProvider` answering for its `fake` providers, the clock seam on Effect's TestClock,
 * and a management key made at start.
 */
import { rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Context, Effect, Either, Layer, Option, Redacted, TestContext } from "effect"
import { demoCatalog, GatewayConfig, parseConfigFile, type Settings, testSettings } from "../config/Config.js"
import type { ConfigFile } from "../config/file.js"
import { type Gateway, type GatewayOptions, makeGateway, type RequestContext } from "../http/server.js"
import { bindTestClock } from "./clock.js"
import { FakeProvider, type FakeProviderShape, makeFakeProvider } from "./fake-provider.js"
import { routeDispatcher } from "./routes.js"

/** The bearer token a test gateway serves GET /metrics with. */
export const TEST_METRICS_TOKEN = "test-metrics-token-0123456789"

/** Where in-process requests say they come from (the server's URL in their `url`). */
export const TEST_ORIGIN = "http://gateway.test"

export interface TestGatewayOptions {
  /** The catalog as the config file writes it (providers, models…); default: the demo catalog. */
  readonly catalog?: unknown
  /** Settings over the test defaults (`testSettings`): limits, broadcast, plugins… */
  readonly settings?: Partial<Settings>
  /** A Postgres URL to run on; default: a new SQLite file in the temp directory, removed at the end. */
  readonly databaseUrl?: string
  /** The TestClock's time at start (default: now); `TestGateway.start` runs on the real clock. */
  readonly startAt?: number | Date
}

type RequestInitWith = RequestInit & {
  /** The bearer key (default: the management key made at start; null: none). */
  readonly key?: string | null
  /** A JSON body (sets content-type). */
  readonly json?: unknown
}

/** Calls the gateway's routes in-process: plain `Request`s in, plain `Response`s out. */
export interface TestClient {
  /** The management key made at start. */
  readonly adminKey: string
  /** The base URL the SDK helpers use (nothing listens there: requests never leave the process). */
  readonly baseUrl: string
  /** A `fetch` bound to the gateway: give it to an SDK, or call it as `fetch`. */
  readonly fetch: (input: RequestInfo | URL, init?: RequestInit) => Promise<Response>
  /** `path` with the management key (or `key`), and `json` as the body. */
  readonly request: (path: string, init?: RequestInitWith) => Promise<Response>
  /** Makes a key (POST /v1/keys with `body`): its secret and hash. */
  readonly createKey: (body?: Record<string, unknown>) => Promise<{ readonly key: string; readonly hash: string }>
  /** Waits until the requests answered so far are settled (charged) and their generation records written. */
  readonly drain: () => Promise<void>
}

export interface TestGatewayShape extends TestClient {
  readonly settings: Settings
  readonly fake: FakeProviderShape
  readonly runtime: Gateway["runtime"]
  readonly gateway: Gateway
}

/** The catalog checked as the config file is (a 4xx-style message naming the field when it is not valid). */
const catalogOf = (input: unknown): ConfigFile => {
  if (input === undefined) return demoCatalog
  const parsed = parseConfigFile("the test catalog", JSON.stringify(input))
  if (Either.isLeft(parsed)) throw new Error(parsed.left.message)
  return parsed.right
}

/** Every `fake` provider without a base_url of its own answers through `fake`. */
const scriptedBy = (catalog: ConfigFile, fake: FakeProviderShape): ConfigFile => ({
  ...catalog,
  providers: catalog.providers.map((p) => (p.kind === "fake" && p.base_url === undefined ? { ...p, base_url: fake.baseUrl } : p)),
})

/** Requests in-process come from the loopback address; there is no idle timeout to lift. */
const inProcess: RequestContext = { requestIP: () => ({ address: "127.0.0.1" }), timeout: () => {} }

const makeClient = (dispatch: (req: Request) => Promise<Response>, adminKey: string, gateway: Gateway): TestClient => {
  const fetchIn = (input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const req = input instanceof Request && init === undefined ? input : new Request(input instanceof URL ? input.href : input, init)
    return dispatch(req)
  }
  const request = (path: string, init: RequestInitWith = {}) => {
    const { key: given, json, ...rest } = init
    const headers = new Headers(rest.headers)
    const key = given === undefined ? adminKey : given
    if (key !== null) headers.set("authorization", `Bearer ${key}`)
    let body = rest.body
    if (json !== undefined) {
      headers.set("content-type", "application/json")
      body = JSON.stringify(json)
    }
    return fetchIn(`${TEST_ORIGIN}${path}`, { ...rest, headers, body })
  }
  return {
    adminKey,
    baseUrl: TEST_ORIGIN,
    fetch: fetchIn,
    request,
    createKey: async (body = {}) => {
      const res = await request("/v1/keys", { method: "POST", json: { name: "test key", ...body } })
      const json = (await res.json()) as { key?: string; data?: { hash?: string } }
      if (res.status !== 201 || json.key === undefined || json.data?.hash === undefined) {
        throw new Error(`POST /v1/keys answered ${res.status}: ${JSON.stringify(json)}`)
      }
      return { key: json.key, hash: json.data.hash }
    },
    drain: async () => {
      await gateway.lifecycle.drain()
      await gateway.runtime.runPromise(gateway.generations.flush)
    },
  }
}

/** Starts a gateway in-process (no socket); `stop` ends it and removes its SQLite file. */
export const startInProcess = async (
  options: TestGatewayOptions & {
    readonly fake?: FakeProviderShape
    readonly layer?: Layer.Layer<never>
    /** The client formats of the data plane (default: the registry, src/formats/index.ts). */
    readonly formats?: GatewayOptions["formats"]
    /** The destination kinds (default: the registry, src/broadcast/exporters/index.ts): a kind of your own, with the registry's. */
    readonly destinationKinds?: GatewayOptions["destinationKinds"]
  } = {},
): Promise<TestGatewayShape & { readonly stop: () => Promise<void> }> => {
  const own = options.fake === undefined ? makeFakeProvider() : undefined
  const fake = options.fake ?? (own as FakeProviderShape)
  const file = options.databaseUrl === undefined ? join(tmpdir(), `gw-kit-${crypto.randomUUID()}.db`) : undefined
  const catalog = scriptedBy(options.settings?.catalog ?? catalogOf(options.catalog), fake)
  const given = testSettings({
    databaseUrl: options.databaseUrl ?? (file as string),
    metricsToken: Redacted.make(TEST_METRICS_TOKEN),
    ...options.settings,
    catalog,
  })
  // Delivery on this thread: the kit's clock (TestClock) moves its retries; the Worker's thread has its own clock.
  const settings: Settings = { ...given, broadcast: { ...given.broadcast, inThread: true } }
  const gateway = await makeGateway(GatewayConfig.layer(settings), {
    ...(options.layer === undefined ? {} : { layer: options.layer }),
    ...(options.formats === undefined ? {} : { formats: options.formats }),
    ...(options.destinationKinds === undefined ? {} : { destinationKinds: options.destinationKinds }),
  })
  gateway.bind(inProcess)
  const managementKey = settings.managementKey
  const adminKey = Option.isSome(managementKey) ? Redacted.value(managementKey.value) : Option.getOrThrow(gateway.createdSecret)
  const client = makeClient(routeDispatcher(gateway.table), adminKey, gateway)
  return {
    ...client,
    settings: gateway.settings,
    fake,
    runtime: gateway.runtime,
    gateway,
    stop: async () => {
      gateway.drainRequests()
      await gateway.lifecycle.idle(1_000)
      await gateway.lifecycle.drain()
      await gateway.runtime.dispose()
      own?.dispose()
      if (file !== undefined) for (const suffix of ["", "-wal", "-shm"]) rmSync(file + suffix, { force: true })
    },
  }
}

/** The gateway under test: `yield* TestGateway` in a program on `TestGateway.layer(…)`. */
export class TestGateway extends Context.Tag("gateway/testing/TestGateway")<TestGateway, TestGatewayShape>() {
  /**
   * The gateway with `FakeProvider` and the TestClock (`TestContext.TestContext` comes with it:
   * `TestClock.adjust` in the program moves the gateway's clock).
   */
  static readonly layer = (options: TestGatewayOptions = {}): Layer.Layer<TestGateway | FakeProvider> =>
    Layer.scoped(
      TestGateway,
      Effect.gen(function* () {
        const fake = yield* FakeProvider
        const startAt = options.startAt === undefined ? Date.now() : new Date(options.startAt).getTime()
        const clock = yield* bindTestClock(startAt)
        return yield* Effect.acquireRelease(
          Effect.promise(() => startInProcess({ ...options, fake, layer: clock })),
          (gw) => Effect.promise(() => gw.stop()),
        )
      }),
    ).pipe(Layer.provideMerge(FakeProvider.layer), Layer.provideMerge(TestContext.TestContext))

  /** The in-process client of the gateway under test. */
  static readonly client: Effect.Effect<TestClient, never, TestGateway> = TestGateway

  /** Outside Effect (a `beforeAll`): a gateway on the real clock with its own FakeProvider; call `stop` after. */
  static readonly start = (options: TestGatewayOptions = {}) => startInProcess(options)
}

/** Resolves once `check()` holds (asked every 20 ms of real time), or fails after `ms`. */
export const eventually = async (check: () => boolean | Promise<boolean>, ms = 10_000, what = "the condition"): Promise<void> => {
  const until = Date.now() + ms
  while (Date.now() < until) {
    if (await check()) return
    await Bun.sleep(20)
  }
  throw new Error(`timed out after ${ms} ms waiting for ${what}`)
}
