/**
 * The Amazon Bedrock provider: the Converse API (`POST /model/{id}/converse`) and ConverseStream
 * (`/converse-stream`, AWS's binary event-stream), signed with SigV4 or a Bedrock API key
 * (credentials.ts), sent through the gateway's upstream transport (call.ts).
 */
import { fromJsonChecked } from "../http"
import { thinkingBudget } from "../anthropic/request"
import { DEFAULT_UPSTREAM_LIMITS, type Provider, type ProviderEvent, type UpstreamCall } from "../types"
import { EVENT_STREAM, postToBedrock, readJson } from "./call"
import { converseJsonEvents } from "./json"
import { converseRequestBody } from "./request"
import { ConverseStreamEvents, ConverseStreamTranslator } from "./stream"
import { modelPath } from "./wire"

const oneBatch = (events: ReadonlyArray<ProviderEvent>): AsyncIterable<ReadonlyArray<ProviderEvent>> => ({
  async *[Symbol.asyncIterator]() {
    yield events
  },
})

export const bedrockProvider: Provider = {
  open: async (request, config, options): Promise<UpstreamCall> => {
    const upstreamBody = converseRequestBody(request)
    const structured = request.responseFormat !== undefined && request.responseFormat.type !== "text"
    const path = modelPath(request.model, options.stream ? "converse-stream" : "converse")
    const answer = await postToBedrock(config, options, path, JSON.stringify(upstreamBody), options.stream ? EVENT_STREAM : "application/json")
    if (!options.stream) {
      const whole = fromJsonChecked("bedrock", await readJson(answer, options), (json) => converseJsonEvents(json, structured))
      return {
        upstreamBody,
        whole,
        get events() {
          return oneBatch(whole)
        },
      }
    }
    const limits = options.limits ?? DEFAULT_UPSTREAM_LIMITS
    const events = new ConverseStreamEvents(new ConverseStreamTranslator(structured), answer.response, answer.link, limits.eventBytes)
    // As the SSE formats' (http.ts): a stream that fails before its first event fails before the first byte.
    await events.firstEvent()
    return { upstreamBody, events, subscribe: (consumer) => events.subscribe(consumer) }
  },
  // Claude's thinking budget is on top of the answer's maximum (request.ts sends their sum).
  thinkingTokens: (reasoning) => thinkingBudget(reasoning) ?? 0,
}
