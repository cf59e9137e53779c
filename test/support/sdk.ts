/**
 * The official clients on a test gateway's port (src/testing/sdk.ts has the in-process ones), with
 * no retries: the SDKs retry every 5xx for up to an hour by default, and a test wants the
 * gateway's first answer. Plus the few ways the tests read what an SDK call threw.
 */
import { expect } from "bun:test"
import Anthropic, { type ClientOptions as AnthropicOptions } from "@anthropic-ai/sdk"
import { OpenRouter, type SDKOptions } from "@openrouter/sdk"
import * as errors from "@openrouter/sdk/models/errors"
import OpenAI, { type ClientOptions as OpenAIOptions } from "openai"

/** Where a gateway listens and its management key (a `TestGateway` is one). */
export interface Listening {
  readonly url: string
  readonly adminKey: string
}

/** The `openai` client on the gateway's /v1 (the management key unless `apiKey`). */
export const openaiAt = (gw: Listening, apiKey: string = gw.adminKey, options: OpenAIOptions = {}): OpenAI =>
  new OpenAI({ apiKey, baseURL: `${gw.url}/v1`, maxRetries: 0, ...options })

/** The `@anthropic-ai/sdk` client (it adds /v1 itself). */
export const anthropicAt = (gw: Listening, apiKey: string = gw.adminKey, options: AnthropicOptions = {}): Anthropic =>
  new Anthropic({ apiKey, baseURL: gw.url, maxRetries: 0, ...options })

/** The `@openrouter/sdk` client on the gateway's /v1. */
export const openRouterAt = (gw: Listening, apiKey: string = gw.adminKey, options: SDKOptions = {}): OpenRouter =>
  new OpenRouter({ apiKey, serverURL: `${gw.url}/v1`, retryConfig: { strategy: "none" }, ...options })

/** The SDKs' promises are lazy: await one directly and hand back what it threw (a call that succeeds fails the test). */
export const caught = async (p: PromiseLike<unknown>): Promise<unknown> => {
  try {
    await p
  } catch (e) {
    return e
  }
  throw new Error("expected the call to fail")
}

/** Fails with the SDK's own account of what did not validate, rather than an opaque error. */
export const validated = async <A>(p: PromiseLike<A>): Promise<A> => {
  try {
    return await p
  } catch (e) {
    if (e instanceof errors.ResponseValidationError) throw new Error(`ResponseValidationError: ${e.pretty()}`)
    throw e
  }
}

/**
 * The `@openrouter/sdk` class for the status: its typed `…ResponseError` where the method declares
 * that status, `OpenRouterDefaultError` where it declares none. Fails with the validation detail
 * (which keys the SDK missed) instead of an opaque class mismatch.
 */
export const expectTyped = (e: unknown, cls: abstract new (...args: never) => unknown, status: number) => {
  if (e instanceof errors.ResponseValidationError) throw new Error(`ResponseValidationError: ${e.pretty()}`)
  expect(e).toBeInstanceOf(cls)
  expect((e as errors.OpenRouterError).statusCode).toBe(status)
}

/** A stream of Responses events an SDK gave, read to the end: the events, their types in order and the text of the deltas. */
export const readStream = async <E extends { readonly type: string }>(stream: AsyncIterable<E>) => {
  const events: Array<E> = []
  let text = ""
  for await (const event of stream) {
    events.push(event)
    if (event.type === "response.output_text.delta" && "delta" in event && typeof event.delta === "string") text += event.delta
  }
  return { events, types: events.map((e) => e.type), text }
}
