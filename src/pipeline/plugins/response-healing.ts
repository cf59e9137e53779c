/**
 * The `response-healing` plugin: a non-streamed answer asked for as JSON (`text.format` of type
 * `json_schema` or `json_object`, which Chat's `response_format` and Messages' `output_format`
 * decode to) whose text is not valid JSON is extracted from code fences or prose and repaired
 * (jsonrepair); with `json_schema` the result is validated (ajv): src/lib/json-healing.ts. Two parts:
 *  - the pre-model stage checks the client's schema (untrusted: size cap, strict compile, no
 *    pattern that can backtrack catastrophically) so a bad one is a 400 before any spend;
 *  - the post-model stage holds the answer's text until the upstream's finish, then heals it.
 * Streams pass through unchanged (their text has reached the client before it could be judged).
 * An answer cut by the token limit is not healed into something it never said: it stays as it
 * was, and the pipeline entry says so.
 * ajv and jsonrepair are loaded by the first request that asks for healing, not at start.
 */
import type { ValidateFunction } from "ajv"
import { Effect, Schema } from "effect"
import { BadRequest } from "../../domain/errors.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import { AnyRecord } from "../../domain/schema-rules.js"
import type { FinishReason, ProviderEvent } from "../../providers/types.js"
import { Missing, type PipelineEntry } from "../stages.js"
import { type PostModelHalf, pluginFields, type RequestPlugin } from "./plugin.js"
import { type Healed, heal, libraries, loadHealing, type Mode, validatorOf } from "../../lib/json-healing.js"

/** The request's JSON mode, when it asks for JSON. */
const modeOf = (request: ResponsesRequest): Mode | undefined => {
  const type = request.text?.format?.type
  return type === "json_schema" || type === "json_object" ? type : undefined
}

const schemaOf = (request: ResponsesRequest): Record<string, unknown> | undefined => {
  const format = request.text?.format
  return format?.type === "json_schema" ? format.schema : undefined
}

export const ResponseHealingPlugin = Schema.Struct(pluginFields("response-healing"), AnyRecord)

export const responseHealingPlugin: RequestPlugin<"response-healing", typeof ResponseHealingPlugin.Type> = {
  id: "response-healing",
  schema: ResponseHealingPlugin,
  pre: () => ({ needsPlan: false, run: (_config, state) => checkRequest(state.request) }),
  post: () => healAnswer,
}

/** Before the model: the healing libraries loaded, the request's JSON Schema compiled (a 400 when it does not). */
const checkRequest = (request: ResponsesRequest) => {
  if (request.stream === true || modeOf(request) === undefined) return undefined
  // The post-model stage heals with them: loaded before the request goes on.
  if (libraries === undefined) return new Missing(Effect.promise(loadHealing))
  const schema = schemaOf(request)
  if (schema === undefined) return undefined
  const checked = validatorOf(schema, "text.format.schema")
  return typeof checked === "string" ? new BadRequest({ message: `Invalid request: ${checked}` }) : undefined
}

// ---------------------------------------------------------------------------------------------
// The post-model stage
// ---------------------------------------------------------------------------------------------

const literalDecoder = new TextDecoder()

const entryOf = (mode: Mode, healed: Healed, truncated: boolean): PipelineEntry => ({
  type: "plugin",
  name: "response-healing",
  summary: truncated
    ? "The answer was cut by the output token limit: left as it was, not healed"
    : healed.changed
      ? `Repaired the answer's JSON${healed.valid ? "" : " (still not valid)"}`
      : healed.valid
        ? "The answer was valid JSON"
        : "The answer's JSON could not be repaired",
  data: { mode, changed: healed.changed, valid: healed.valid, ...(truncated ? { truncated: true } : {}) },
})

/** Over the answer: its text collected, healed at the finish, and sent as one text event before it. */
const healAnswer: PostModelHalf<unknown> = (_config, request, report) => {
  if (request.stream === true) return undefined
  const mode = modeOf(request)
  if (mode === undefined) return undefined
  const schema = schemaOf(request)
  const validate = schema === undefined ? undefined : validatorOf(schema, "text.format.schema")
  // The pre-model stage refused a schema that does not compile: none reaches here.
  if (typeof validate === "string") return undefined
  let text = ""
  return (events) => {
    const out: Array<ProviderEvent> = []
    for (const event of events) {
      if (event.type === "text") text += event.delta
      else if (event.type === "text_literals") {
        const spans = event.spans
        for (let i = 0; i < spans.length; i += 2) {
          text += JSON.parse(literalDecoder.decode(event.source.subarray(spans[i] as number, spans[i + 1] as number))) as string
        }
      } else if (event.type === "finish") {
        out.push(...healedEvents(text, event.reason, mode, validate, report), event)
        text = ""
      } else out.push(event)
    }
    return out
  }
}

const healedEvents = (
  text: string,
  reason: FinishReason,
  mode: Mode,
  validate: ValidateFunction | undefined,
  report: (entry: PipelineEntry) => void,
): ReadonlyArray<ProviderEvent> => {
  const keep: ReadonlyArray<ProviderEvent> = text === "" ? [] : [{ type: "text", delta: text }]
  // Only a text answer is healed (a tool call's arguments are the tool's business).
  if (reason === "tool_calls" || reason === "error" || reason === "content_filter" || text === "") return keep
  if (reason === "length") {
    report(entryOf(mode, { text, changed: false, valid: false }, true))
    return keep
  }
  const healed = heal(text, mode, validate)
  if (healed.changed || !healed.valid) report(entryOf(mode, healed, false))
  return healed.text === "" ? [] : [{ type: "text", delta: healed.text }]
}
