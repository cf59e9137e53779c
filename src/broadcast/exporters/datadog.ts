/**
 * Datadog LLM Observability: its HTTP spans API, `POST https://api.<site>/api/intake/llm-obs/v1/trace/spans`
 * with `DD-API-KEY`, one `llm` span per generation under the config's `mlApp` (the site defaults to
 * datadoghq.com; `site` picks another region). Datadog's span ids are decimal strings (as its SDKs
 * send them); the trace id is the generation's 32-hex trace id. Times are nanoseconds.
 * Not Datadog's OTLP intake for LLM Observability: there `ml_app` is taken from the root span's
 * service, so the destination's `mlApp` could not be honoured; the spans API takes it as given.
 */
import { Schema } from "effect"
import { configLiteral, ConfigText } from "../../domain/destinations.js"
import { defineKind, type GenerationView } from "../exporter.js"
import { withConfig } from "./vendor-config.js"

export const datadogIntakeUrl = (site: string) => `https://api.${site}/api/intake/llm-obs/v1/trace/spans`

const decimal = (hex: string) => BigInt(`0x${hex}`).toString(10)

const tag = (key: string, value: string) => `${key}:${value}`

export const datadogSpan = (g: GenerationView) => {
  const meta: Record<string, unknown> = {
    kind: "llm",
    metadata: {
      model_name: g.upstreamModel || g.model,
      model_provider: g.provider,
      generation_id: g.id,
      requested_model: g.model,
      finish_reason: g.finishReason,
      streamed: g.streamed,
      ...g.metadata,
    },
  }
  if (g.input !== undefined) meta.input = { messages: g.input.map((m) => ({ role: m.role, content: m.content })) }
  if (g.output !== undefined) meta.output = { messages: [{ role: "assistant", content: g.output }] }
  if (g.error !== undefined) meta.error = { message: g.error.message, type: `http_${g.error.status}` }
  const metrics: Record<string, number> = {
    input_tokens: g.inputTokens,
    output_tokens: g.outputTokens,
    total_tokens: g.inputTokens + g.outputTokens,
  }
  if (g.cost !== undefined) metrics.estimated_total_cost = g.cost.total
  return {
    name: g.generationName,
    span_id: decimal(g.spanId),
    trace_id: g.traceId,
    parent_id: g.parentSpanId === undefined ? "undefined" : decimal(g.parentSpanId),
    start_ns: Math.round(g.startMs) * 1_000_000,
    duration: Math.round(Math.max(0, g.endMs - g.startMs) * 1_000_000),
    status: g.error === undefined ? "ok" : "error",
    meta,
    metrics,
    ...(g.sessionId === null ? {} : { session_id: g.sessionId }),
    tags: [
      tag("model", g.model),
      tag("provider", g.provider),
      tag("trace_name", g.traceName),
      ...(g.user === null ? [] : [tag("user_id", g.user)]),
    ],
  }
}

export const DATADOG_SITES = [
  "datadoghq.com",
  "us3.datadoghq.com",
  "us5.datadoghq.com",
  "datadoghq.eu",
  "ap1.datadoghq.com",
  "ap2.datadoghq.com",
  "uk1.datadoghq.com",
] as const

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, mlApp: ConfigText, site: Schema.optional(configLiteral(DATADOG_SITES)) })

export const datadog = defineKind({
  kind: "datadog",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [
        {
          url: datadogIntakeUrl(config.site ?? "datadoghq.com"),
          method: "POST",
          headers: { "dd-api-key": config.apiKey, "content-type": "application/json" },
          body: JSON.stringify({
            data: {
              type: "span",
              attributes: { ml_app: config.mlApp, tags: ["source:gateway"], spans: batch.generations.map(datadogSpan) },
            },
          }),
        },
      ],
    })),
})
