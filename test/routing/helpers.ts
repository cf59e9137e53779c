/**
 * Gateways over a test catalog whose providers all point at the mock upstream, each with its
 * own behaviour (fixed `x-mock-*` headers) and a tag header, so the mock's request log says
 * which provider was called.
 */
import { expect } from "bun:test"
import type { MockUpstream } from "../../scripts/mock-upstream.js"
import type { ConfigFile, EndpointEntry, ModelEntry, ProviderEntry } from "../../src/config/file.js"
import { type InProcessGateway, startInProcessGateway } from "../support/gateway.js"

/** Every mock answer reports this many input tokens (and `tokens` output tokens, 3 by default). */
export const USAGE_INPUT = 100

export const TAG = "x-provider-tag"

export const mockProvider = (
  mock: MockUpstream,
  id: string,
  headers: Record<string, string> = {},
  extra: Partial<ProviderEntry> = {},
): ProviderEntry => ({
  id,
  kind: "openai-chat",
  base_url: mock.url,
  headers: { [TAG]: id, "x-mock-usage-input": String(USAGE_INPUT), ...headers },
  ...extra,
})

export const endpoint = (
  provider: string,
  prompt: number,
  completion: number,
  extra: Partial<Omit<EndpointEntry, "provider" | "pricing">> = {},
): EndpointEntry => ({ provider, upstream_model: `${provider}-model`, pricing: { prompt, completion }, ...extra })

export const model = (id: string, ...endpoints: Array<EndpointEntry>): ModelEntry => ({
  id,
  context_length: 100_000,
  endpoints: endpoints as unknown as ModelEntry["endpoints"],
})

export const catalogOf = (providers: ReadonlyArray<ProviderEntry>, models: ReadonlyArray<ModelEntry>): ConfigFile => ({
  providers,
  models,
})

/**
 * A port nothing listens on (a connection to it is refused). Below the ephemeral range
 * (32768-60999 here), so a server of the same test asking for port 0 is never given it: a freed
 * ephemeral port once went to the gateway itself, which then answered 404 for the "refused" upstream.
 */
export const closedPort = async (): Promise<number> => {
  for (;;) {
    const port = 20_000 + Math.floor(Math.random() * 10_000)
    const refused = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } }).then(
      (socket) => {
        socket.end()
        return false
      },
      () => true,
    )
    if (refused) return port
  }
}

export type Gateway = InProcessGateway & { stop: () => Promise<void> }

export const startGateway = (catalog: ConfigFile) => startInProcessGateway({ catalog })

export interface Attempt {
  readonly model: string
  readonly provider: string
  readonly status: number
}

export interface ServiceMetadata {
  readonly requested: string
  readonly strategy: string
  readonly attempt: number
  readonly attempts: ReadonlyArray<Attempt>
  readonly endpoints: { readonly total: number; readonly available: ReadonlyArray<{ model: string; provider: string; selected: boolean }> }
}

export interface Answer {
  readonly status: number
  readonly model: string
  readonly cost: number
  readonly meta: ServiceMetadata
  /** The provider that served (from service_metadata). */
  readonly servedBy: string | undefined
  readonly generationId: string | null
  readonly body: Record<string, unknown>
}

/** POST /v1/responses with metadata enabled; JSON answers only. */
export const ask = async (gw: Gateway, json: Record<string, unknown>, key?: string): Promise<Answer> => {
  const res = await gw.fetch("/v1/responses", {
    method: "POST",
    json: { input: "hello", ...json },
    headers: { "x-service-metadata": "enabled" },
    ...(key === undefined ? {} : { key }),
  })
  const body = (await res.json()) as Record<string, unknown>
  const meta = body["service_metadata"] as ServiceMetadata
  const usage = body["usage"] as { cost?: number } | undefined
  return {
    status: res.status,
    model: body["model"] as string,
    cost: usage?.cost ?? Number.NaN,
    meta,
    servedBy: meta?.endpoints.available.find((e) => e.selected)?.provider,
    generationId: res.headers.get("x-generation-id"),
    body,
  }
}

/** An answer that must be 200; fails the test with the body otherwise. */
export const ok = async (gw: Gateway, json: Record<string, unknown>, key?: string): Promise<Answer> => {
  const answer = await ask(gw, json, key)
  if (answer.status !== 200) throw new Error(`expected 200, got ${answer.status}: ${JSON.stringify(answer.body)}`)
  return answer
}

/** The error status and message of a request that must fail. */
export const refused = async (gw: Gateway, json: Record<string, unknown>): Promise<{ status: number; message: string }> => {
  const answer = await ask(gw, json)
  const error = answer.body["error"] as { code: number; message: string } | undefined
  if (answer.status === 200 || error === undefined) throw new Error(`expected an error, got ${JSON.stringify(answer.body)}`)
  expect(error.code).toBe(answer.status)
  return { status: answer.status, message: error.message }
}

/** USD for one mock answer at an endpoint's price (USD per million tokens). */
export const costAt = (prompt: number, completion: number, outputTokens = 3) =>
  Math.round((USAGE_INPUT * prompt + outputTokens * completion) * 1e6) / 1e12

/** Tags of the providers the mock was called as, since `from` in its log. */
export const calledSince = (mock: MockUpstream, from: number) => mock.requests.slice(from).map((r) => r.headers[TAG])
