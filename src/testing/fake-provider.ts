/**
 * A scripted upstream for tests (docs/testing.md): per provider, or per provider and upstream
 * model, a queue of behaviours — an answer (text, chunks with delays, tool calls, reasoning,
 * usage), an error by status or kind, a hang until aborted, a fault after N chunks — and a record
 * of what each call received. It answers for the catalog's `fake` providers through their
 * `base_url` (src/providers/fake.ts); a call with nothing queued answers as the production fake does.
 */
import { Context, Effect, Layer } from "effect"
import type { AbortLike } from "../providers/abort.js"
import { fakeInputTokens, fakeProvider, fakeSleep, fakeWords, scriptedProviders } from "../providers/fake.js"
import { type ChatRequestBody, chatRequestBody } from "../providers/openai-chat/request.js"
import {
  type CallOptions,
  type NormalizedRequest,
  type Provider,
  type ProviderConfig,
  ProviderError,
  type ProviderErrorKind,
  type ProviderEvent,
  type UpstreamCall,
} from "../providers/types.js"
import type { Usage } from "../domain/pricing.js"

export interface FakeToolCall {
  readonly name: string
  /** An object (sent as its JSON) or the arguments' text as it is. */
  readonly arguments: unknown
  readonly id?: string
}

/** An error: an upstream HTTP status (429, 500, 503, 529, 400, 401…) or a failure kind. */
export interface FakeFailure {
  readonly status?: number
  readonly kind?: ProviderErrorKind
  readonly message?: string
  readonly retryAfterSeconds?: number
}

export interface FakeAnswer {
  /** The answer's text, sent as word-sized chunks (`chunks` instead to choose them). */
  readonly text?: string
  readonly chunks?: ReadonlyArray<string>
  readonly reasoning?: string
  readonly toolCalls?: ReadonlyArray<FakeToolCall>
  /** Defaults: input from the prompt's length (a token per 4 characters), output a token per chunk. */
  readonly usage?: Partial<Usage>
  /** Real milliseconds before each chunk after the first, and before the first. */
  readonly delayMs?: number
  readonly firstDelayMs?: number
  /** Fails after this many chunks (a non-streamed call is refused then, as its whole answer never came). */
  readonly faultAfter?: number
  /** The fault's error (default: 500 server error). */
  readonly fault?: FakeFailure
}

export type FakeBehaviour =
  | { readonly _tag: "answer"; readonly answer: FakeAnswer }
  | { readonly _tag: "fail"; readonly failure: FakeFailure }
  | { readonly _tag: "hang" }

/** What one upstream call received: the normalized request, and its body on the OpenAI Chat Completions wire. */
export interface ReceivedCall {
  readonly provider: string
  readonly model: string
  readonly stream: boolean
  readonly request: NormalizedRequest
  readonly body: ChatRequestBody
  /** What the call was answered with: a behaviour's tag, or "default" (the production fake's answer). */
  readonly answeredWith: FakeBehaviour["_tag"] | "default"
}

const KIND_OF_STATUS: ReadonlyArray<[number, ProviderErrorKind]> = [
  [429, "rate_limited"],
  [529, "overloaded"],
  [401, "auth"],
  [403, "auth"],
  [408, "timeout"],
  [524, "timeout"],
]

export const providerErrorOf = (failure: FakeFailure): ProviderError => {
  const status = failure.status
  const kind =
    failure.kind ??
    KIND_OF_STATUS.find(([s]) => s === status)?.[1] ??
    (status !== undefined && status >= 500 ? "server" : status !== undefined && status >= 400 ? "bad_request" : "server")
  return new ProviderError(kind, failure.message ?? `fake: ${status ?? kind}`, status, failure.retryAfterSeconds)
}

/** Behaviours, to queue with `FakeProvider.script`. */
export const Behaviour = {
  /** A whole answer (a JSON answer, or the same as a stream when the call streams). */
  answer: (answer: FakeAnswer | string): FakeBehaviour => ({ _tag: "answer", answer: typeof answer === "string" ? { text: answer } : answer }),
  /** Text in these chunks. */
  chunks: (chunks: ReadonlyArray<string>, options: Omit<FakeAnswer, "chunks" | "text"> = {}): FakeBehaviour => ({
    _tag: "answer",
    answer: { ...options, chunks },
  }),
  /** A call to each tool. */
  toolCalls: (...calls: ReadonlyArray<FakeToolCall>): FakeBehaviour => ({ _tag: "answer", answer: { toolCalls: calls } }),
  /** Refused before the answer begins. */
  fail: (failure: number | ProviderErrorKind | FakeFailure): FakeBehaviour => ({
    _tag: "fail",
    failure: typeof failure === "number" ? { status: failure } : typeof failure === "string" ? { kind: failure } : failure,
  }),
  /** Never answers; ends when the call is aborted (the client left, the request's deadline). */
  hang: (): FakeBehaviour => ({ _tag: "hang" }),
} as const

const aborted = () => new ProviderError("connection", "the upstream call was aborted by the caller")

const argumentsText = (value: unknown): string => (typeof value === "string" ? value : JSON.stringify(value))

/** The event batches of an answer: one a chunk, usage and finish last. */
const batchesOf = (answer: FakeAnswer, request: NormalizedRequest): Array<Array<ProviderEvent>> => {
  const batches: Array<Array<ProviderEvent>> = []
  let reasoningTokens = 0
  if (answer.reasoning !== undefined) {
    for (const word of fakeWords(answer.reasoning)) batches.push([{ type: "reasoning", delta: word }])
    reasoningTokens = batches.length
  }
  const chunks = answer.chunks ?? (answer.text !== undefined ? fakeWords(answer.text) : [])
  for (const chunk of chunks) batches.push([{ type: "text", delta: chunk }])
  const calls = answer.toolCalls ?? []
  calls.forEach((call, index) => {
    batches.push(
      [{ type: "tool_call_start", index, callId: call.id ?? `call_fake_${index}`, name: call.name }],
      [{ type: "tool_call_delta", index, delta: argumentsText(call.arguments) }],
    )
  })
  const usage: Usage = {
    inputTokens: fakeInputTokens(request),
    cachedTokens: 0,
    cacheWriteTokens: 0,
    outputTokens: batches.length,
    reasoningTokens,
    ...answer.usage,
  }
  batches.push([
    { type: "usage", usage },
    { type: "finish", reason: calls.length > 0 ? "tool_calls" : "stop" },
  ])
  return batches
}

const play = async function* (answer: FakeAnswer, batches: Array<Array<ProviderEvent>>, signal: AbortLike) {
  for (let i = 0; i < batches.length; i++) {
    if (signal.aborted) throw aborted()
    const delay = i === 0 ? (answer.firstDelayMs ?? 0) : (answer.delayMs ?? 0)
    if (delay > 0) await fakeSleep(delay, signal)
    if (answer.faultAfter !== undefined && i === answer.faultAfter) {
      const e = providerErrorOf(answer.fault ?? { status: 500, message: "fake: failed mid-answer" })
      e.answerBegun = true
      throw e
    }
    yield batches[i] as ReadonlyArray<ProviderEvent>
  }
}

export interface FakeProviderShape {
  /** The `base_url` a catalog's `fake` provider entry answers through this script with (the kit sets it). */
  readonly baseUrl: string
  /**
   * Queues behaviours for `target`: a provider id (`"primary"`), or a provider id and its
   * endpoint's upstream model (`"primary:gpt-x"`); each call takes the next one.
   */
  readonly script: (target: string, ...behaviours: ReadonlyArray<FakeBehaviour>) => void
  /** The calls made so far (to `target` only, when given), oldest first. */
  readonly received: (target?: string) => ReadonlyArray<ReceivedCall>
  /** Drops the queues and the record. */
  readonly reset: () => void
  readonly provider: Provider
}

/** A scripted provider, registered under its `baseUrl` until `dispose` (the layer does both). */
export const makeFakeProvider = (): FakeProviderShape & { readonly dispose: () => void } => {
  const baseUrl = `fake-provider://${crypto.randomUUID()}`
  const queues = new Map<string, Array<FakeBehaviour>>()
  const calls: Array<ReceivedCall> = []
  const next = (provider: string, model: string): FakeBehaviour | undefined =>
    queues.get(`${provider}:${model}`)?.shift() ?? queues.get(provider)?.shift()

  const open = async (request: NormalizedRequest, config: ProviderConfig, options: CallOptions): Promise<UpstreamCall> => {
    const behaviour = next(config.id, request.model)
    const body = chatRequestBody(request, options.stream)
    calls.push({ provider: config.id, model: request.model, stream: options.stream, request, body, answeredWith: behaviour?._tag ?? "default" })
    if (options.signal.aborted) throw aborted()
    if (behaviour === undefined) return fakeProvider.open(request, { ...config, base_url: undefined }, options)
    switch (behaviour._tag) {
      case "fail":
        throw providerErrorOf(behaviour.failure)
      case "hang":
        return new Promise<UpstreamCall>((_, reject) => {
          if (options.signal.aborted) return reject(aborted())
          options.signal.addEventListener("abort", () => reject(aborted()), { once: true })
        })
      case "answer": {
        const answer = behaviour.answer
        const batches = batchesOf(answer, request)
        if (options.stream) return { upstreamBody: body, events: play(answer, batches, options.signal) }
        // A non-streamed answer arrives whole: its chunks are read before the call answers, and a fault refuses it.
        const whole: Array<ProviderEvent> = []
        for await (const batch of play(answer, batches, options.signal)) whole.push(...batch)
        return {
          upstreamBody: body,
          whole,
          events: {
            async *[Symbol.asyncIterator]() {
              yield whole
            },
          },
        }
      }
    }
  }
  const provider: Provider = { open }
  scriptedProviders.set(baseUrl, provider)
  return {
    baseUrl,
    provider,
    script: (target, ...behaviours) => {
      const queue = queues.get(target) ?? []
      queue.push(...behaviours)
      queues.set(target, queue)
    },
    received: (target) =>
      target === undefined ? [...calls] : calls.filter((c) => c.provider === target || `${c.provider}:${c.model}` === target),
    reset: () => {
      queues.clear()
      calls.length = 0
    },
    dispose: () => {
      scriptedProviders.delete(baseUrl)
    },
  }
}

/** The scripted provider as a service: `yield* FakeProvider` in a test on `TestGateway.layer`. */
export class FakeProvider extends Context.Tag("gateway/testing/FakeProvider")<FakeProvider, FakeProviderShape>() {
  static readonly layer: Layer.Layer<FakeProvider> = Layer.scoped(
    FakeProvider,
    Effect.acquireRelease(Effect.sync(makeFakeProvider), (fake) => Effect.sync(fake.dispose)),
  )
  static readonly answer = Behaviour.answer
  static readonly chunks = Behaviour.chunks
  static readonly toolCalls = Behaviour.toolCalls
  static readonly fail = Behaviour.fail
  static readonly hang = Behaviour.hang
}
