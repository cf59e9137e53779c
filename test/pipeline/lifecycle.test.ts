/**
 * One owner of a request's life: finish settles and records exactly once whatever
 * calls it; shutdown waits on the lifecycle (idle, drain, open streams); /metrics reads its count.
 */
import { describe, expect, test } from "bun:test"
import { Option } from "effect"
import type { GenerationEntry } from "../../src/domain/generations.js"
import type { ProviderEvent } from "../../src/providers/types.js"
import { makeFinish, type RequestLife } from "../../src/pipeline/finish.js"
import { RequestLifecycle } from "../../src/pipeline/lifecycle.js"
import { postModelFor } from "../../src/pipeline/post-model.js"
import { pluginSetOf } from "../../src/pipeline/plugins/index.js"
import { testSettings } from "../../src/config/Config.js"
import type { Prepared } from "../../src/pipeline/pre-model.js"
import type { Endpoint } from "../../src/services/Catalog.js"
import type { GenerationStore } from "../../src/services/GenerationStore.js"
import { decodeResponsesRequest } from "../../src/domain/responses.js"
import { Either } from "effect"
import { useInProcessGateway, TEST_METRICS_TOKEN } from "../support/gateway.js"

/** A fake that dies loudly on anything but what finish may call. */
const dieOnOther = <T extends object>(name: string, impl: Partial<T>): T =>
  new Proxy(impl as T, {
    get(target, prop) {
      if (prop in target) return (target as Record<PropertyKey, unknown>)[prop]
      if (prop === "then") return undefined
      throw new Error(`${name}.${String(prop)} is not implemented by this fake`)
    },
  })

const endpoint = {
  modelId: "demo/echo",
  upstreamModel: "echo",
  provider: { id: "fake", kind: "fake" },
  pricing: { prompt: 1, completion: 2 },
  contextLength: 100_000,
  isByok: false,
} as unknown as Endpoint

const prepared = {
  principal: { hash: "h", userId: "u", workspaceId: "w", key: { id: "1", include_byok_in_limit: 0 } },
  request: Either.getOrThrow(decodeResponsesRequest({ model: "demo/echo", input: "hi" })),
  reservation: Option.none(),
  plan: { requested: "demo/echo", strategy: "default", candidates: [endpoint] },
  estimatedInputTokens: 1,
  promptBound: 300,
  sessionId: null,
  storeContent: false,
  httpReferer: null,
  appTitle: null,
  userAgent: null,
} as unknown as Prepared

describe("finish", () => {
  test("settles and records a request once, however many times it is called", () => {
    const recorded: Array<GenerationEntry> = []
    const lifecycle = new RequestLifecycle(10, 10, () => "")
    const finish = makeFinish({
      generationStore: dieOnOther<GenerationStore>("GenerationStore", {
        durable: false,
        recordSync: (entry: GenerationEntry) => {
          recorded.push(entry)
          return true
        },
      } as Partial<GenerationStore>),
      runPromise: () => Promise.reject(new Error("no runtime call expected for a request that holds nothing")),
      lifecycle,
      log: () => {
        throw new Error("nothing to log")
      },
    })
    const life: RequestLife = { prepared, generationId: "gen-1", startedAt: Date.now(), requestId: "req-1", finished: false }
    finish(life, false, { endpoint, assembler: undefined, status: "completed", firstTokenAt: undefined })
    // The catch-all, a stream's cancel after its end: nothing more.
    finish(life, false, { endpoint: undefined, assembler: undefined, status: "failed", firstTokenAt: undefined })
    finish(life, true, { endpoint, assembler: undefined, status: "cancelled", firstTokenAt: undefined })
    expect(recorded.map((e) => [e.id, e.status])).toEqual([["gen-1", "completed"]])
    expect(life.finished).toBe(true)
  })
})

describe("the request lifecycle", () => {
  const slot = () => ({ inFlightRequest: undefined, address: undefined })

  test("idle resolves when the last request in flight leaves", async () => {
    const lifecycle = new RequestLifecycle(10, 10, () => "")
    const a = slot()
    lifecycle.enter(new Request("http://x/"), a)
    let idle = false
    const waiting = lifecycle.idle(10_000).then(() => {
      idle = true
    })
    await Bun.sleep(5)
    expect(idle).toBe(false)
    lifecycle.leave(a)
    await waiting
    expect(idle).toBe(true)
  })

  test("drain waits for every settlement handed to it", async () => {
    const lifecycle = new RequestLifecycle(10, 10, () => "")
    let settled = false
    lifecycle.settlingOn(Bun.sleep(20).then(() => {
      settled = true
    }))
    await lifecycle.drain()
    expect(settled).toBe(true)
  })

  test("cutStreams cuts every open stream once and says how many", () => {
    const lifecycle = new RequestLifecycle(10, 10, () => "")
    const cut: Array<string> = []
    const a = () => {
      cut.push("a")
      lifecycle.closeStream(a)
    }
    const b = () => {
      cut.push("b")
      lifecycle.closeStream(b)
    }
    lifecycle.openStream(a)
    lifecycle.openStream(b)
    expect(lifecycle.cutStreams()).toBe(2)
    expect(lifecycle.cutStreams()).toBe(0)
    expect(cut).toEqual(["a", "b"])
  })
})

describe("post-model stages", () => {
  test("no stage applies: no per-batch step at all", () => {
    expect(postModelFor(prepared.request, () => {}, pluginSetOf({ settings: testSettings() }).post)).toBeUndefined()
  })

  test("the stages that apply run in order over each batch", () => {
    const tag = (suffix: string) => (events: ReadonlyArray<ProviderEvent>) =>
      events.map((e) => (e.type === "text" ? { ...e, delta: e.delta + suffix } : e))
    const run = postModelFor(prepared.request, () => {}, [
      { name: "a", start: () => tag("-a") },
      { name: "off", start: () => undefined },
      { name: "b", start: () => tag("-b") },
    ])
    expect(run?.([{ type: "text", delta: "x" }])).toEqual([{ type: "text", delta: "x-a-b" }])
  })
})

const gw = useInProcessGateway()

describe("GET /metrics: requests in flight", () => {
  const inFlight = async () => {
    const text = await (await gw().fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    return Number(/^gateway_requests_in_flight (\d+)$/m.exec(text)?.[1])
  }

  test("a stream counts until its end; the scrape counts itself", async () => {
    expect(await inFlight()).toBe(1)
    const abort = new AbortController()
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      json: { model: "demo/echo", input: "wait [ttft:5000]", stream: true },
      signal: abort.signal,
    })
    expect(res.status).toBe(200)
    expect(await inFlight()).toBe(2)
    abort.abort()
    await gw().server.drain()
    for (let i = 0; i < 50 && (await inFlight()) !== 1; i++) await Bun.sleep(20)
    expect(await inFlight()).toBe(1)
  })
})

