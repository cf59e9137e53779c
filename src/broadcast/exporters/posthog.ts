/**
 * PostHog LLM analytics: one `$ai_generation` event per generation through the batch capture API,
 * `POST {host}/batch/` (https://us.i.posthog.com; EU https://eu.i.posthog.com, or self-hosted) with
 * the project API key in the body. Each event's `uuid` derives from the generation id, so a repeated
 * delivery is the same event to PostHog. Without a `user` the trace id is the distinct id and no
 * person profile is made.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind, type GenerationView } from "../exporter.js"
import { stableUuid, withConfig } from "./vendor-config.js"

export const POSTHOG_HOST = "https://us.i.posthog.com"

export const posthogEvent = (g: GenerationView) => {
  const properties: Record<string, unknown> = {}
  // The request's trace metadata first, so the `$ai_*` properties below always win.
  for (const [key, value] of Object.entries(g.metadata)) if (!key.startsWith("$") && key !== "distinct_id") properties[key] = value
  Object.assign(properties, {
    distinct_id: g.user ?? g.traceId,
    $ai_trace_id: g.traceId,
    $ai_span_id: g.spanId,
    $ai_span_name: g.generationName,
    $ai_generation_id: g.id,
    $ai_model: g.upstreamModel || g.model,
    $ai_provider: g.provider,
    $ai_input_tokens: g.inputTokens,
    $ai_output_tokens: g.outputTokens,
    $ai_cache_read_input_tokens: g.cachedTokens,
    $ai_reasoning_tokens: g.reasoningTokens,
    $ai_latency: Math.max(0, g.endMs - g.startMs) / 1000,
    $ai_stream: g.streamed,
    $ai_http_status: g.error?.status ?? 200,
    $ai_is_error: g.error !== undefined,
    $ai_stop_reason: g.finishReason,
    requested_model: g.model,
  })
  if (g.parentSpanId !== undefined) properties.$ai_parent_id = g.parentSpanId
  if (g.sessionId !== null) properties.$ai_session_id = g.sessionId
  if (g.user === null) properties.$process_person_profile = false
  if (g.error !== undefined) properties.$ai_error = g.error.message
  if (g.input !== undefined) properties.$ai_input = g.input.map((m) => ({ role: m.role, content: m.content }))
  if (g.output !== undefined) properties.$ai_output_choices = [{ role: "assistant", content: g.output }]
  if (g.cost !== undefined) {
    properties.$ai_input_cost_usd = g.cost.input
    properties.$ai_output_cost_usd = g.cost.output
    properties.$ai_total_cost_usd = g.cost.total
  }
  return {
    event: "$ai_generation",
    uuid: stableUuid(g.id),
    timestamp: new Date(g.startMs).toISOString(),
    properties,
  }
}

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, host: Schema.optional(ConfigUrl) })

export const posthog = defineKind({
  kind: "posthog",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [
        {
          url: `${(config.host ?? POSTHOG_HOST).replace(/\/+$/, "")}/batch/`,
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ api_key: config.apiKey, historical_migration: false, batch: batch.generations.map(posthogEvent) }),
        },
      ],
    })),
})
