/** Shared helpers for the provider tests: requests, configs and draining an upstream call. */
import { afterAll, beforeAll, beforeEach } from "bun:test"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream"
import { consumeEvents } from "../../src/providers/consume"
import { ProviderError, type NormalizedRequest, type ProviderConfig, type ProviderEvent, type UpstreamCall } from "../../src/providers/types"

export const textRequest = (text: string, overrides: Partial<NormalizedRequest> = {}): NormalizedRequest => ({
  model: "mock-model",
  input: [{ type: "message", role: "user", content: [{ type: "text", text }] }],
  tools: [],
  ...overrides,
})

export const weatherTool = {
  type: "function" as const,
  name: "get_weather",
  description: "Weather of a city",
  parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
}

export const configFor = (kind: ProviderConfig["kind"], baseUrl: string, headers: Record<string, string> = {}, timeoutMs?: number): ProviderConfig => ({
  id: `test-${kind}`,
  kind,
  base_url: baseUrl,
  headers,
  ...(timeoutMs === undefined ? {} : { timeout_ms: timeoutMs }),
})

/** All batches of a call, as they arrived. */
export const batchesOf = async (call: UpstreamCall): Promise<Array<ReadonlyArray<ProviderEvent>>> => {
  const batches: Array<ReadonlyArray<ProviderEvent>> = []
  for await (const batch of call.events) batches.push(batch.flatMap(literalTexts).map(withoutLiteral))
  return batches
}

const utf8 = new TextDecoder()

/**
 * A `text_literals` event as the text events it stands for, each with its literal as `json`
 * (checked: a non-empty string, printable ASCII); any other event as it is.
 */
export const literalTexts = (event: ProviderEvent): Array<ProviderEvent> => {
  if (event.type !== "text_literals") return [event]
  const texts: Array<ProviderEvent> = []
  for (let i = 0; i < event.spans.length; i += 2) {
    const json = utf8.decode(event.source.subarray(event.spans[i], event.spans[i + 1]))
    if (!/^"[\x20-\x7e]*"$/.test(json)) throw new Error(`literal ${json} is not printable ASCII in quotes`)
    const delta: unknown = JSON.parse(json)
    if (typeof delta !== "string" || delta === "") throw new Error(`literal ${json} is not a non-empty string`)
    texts.push({ type: "text", delta, json })
  }
  return texts
}

/**
 * A text event as the tests compare it: the upstream's own literal of the delta (an adapter's
 * fast path) is checked to decode to the delta, then dropped.
 */
const withoutLiteral = (event: ProviderEvent): ProviderEvent => {
  if (event.type !== "text" || event.json === undefined) return event
  if (JSON.parse(event.json) !== event.delta) throw new Error(`literal ${event.json} does not decode to ${JSON.stringify(event.delta)}`)
  return { type: "text", delta: event.delta }
}

export const eventsOf = async (call: UpstreamCall): Promise<Array<ProviderEvent>> => (await batchesOf(call)).flat()

/** The ProviderError a promise rejects with; fails the test when it resolves or rejects otherwise. */
export const providerErrorOf = async (promise: Promise<unknown>): Promise<ProviderError> => {
  try {
    await promise
  } catch (error) {
    if (error instanceof ProviderError) return error
    throw new Error(`expected a ProviderError, got ${String(error)}`)
  }
  throw new Error("expected a ProviderError, but the call succeeded")
}

/** Waits until `check` holds, polling every 5 ms, up to `ms`. */
export const eventually = async (check: () => boolean, ms = 1000): Promise<boolean> => {
  const until = performance.now() + ms
  while (performance.now() < until) {
    if (check()) return true
    await Bun.sleep(5)
  }
  return check()
}

export const usage = (inputTokens: number, outputTokens: number, more: { cachedTokens?: number; cacheWriteTokens?: number; reasoningTokens?: number } = {}) => ({
  type: "usage" as const,
  usage: {
    inputTokens,
    cachedTokens: more.cachedTokens ?? 0,
    cacheWriteTokens: more.cacheWriteTokens ?? 0,
    outputTokens,
    reasoningTokens: more.reasoningTokens ?? 0,
  },
})

/** A mock upstream for the whole file (3 deltas per answer unless a request says otherwise), reset before each test. */
export const useMockUpstream = (): { readonly current: MockUpstream } => {
  const holder = {} as { current: MockUpstream }
  beforeAll(async () => {
    holder.current = await startMockUpstream({ port: 0, tokens: 3 })
  })
  afterAll(async () => {
    await holder.current.stop()
  })
  beforeEach(() => holder.current.reset())
  return holder
}

/**
 * A call's events pushed to a consumer (`consumeEvents`), as the relay takes them: what came (the
 * upstream's literals as text events), the batches and terminal callbacks counted, and the subscription.
 */
export const consumed = (call: UpstreamCall, onBatch?: (events: ReadonlyArray<ProviderEvent>) => void) => {
  let settle = () => {}
  const settled = new Promise<void>((resolve) => {
    settle = resolve
  })
  const counts = { batches: 0, ends: 0 }
  const events: Array<ProviderEvent> = []
  const errors: Array<unknown> = []
  const subscription = consumeEvents(call, {
    batch(batch) {
      onBatch?.(batch)
      counts.batches++
      events.push(...batch.flatMap(literalTexts))
    },
    end() {
      counts.ends++
      settle()
    },
    error(cause) {
      errors.push(cause)
      settle()
    },
  })
  return {
    events,
    errors,
    settled,
    get batches() {
      return counts.batches
    },
    get ends() {
      return counts.ends
    },
    stop: subscription.stop,
    pause: subscription.pause,
    resume: subscription.resume,
  }
}
