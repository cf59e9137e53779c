/**
 * Arize AX: OTLP traces to `{endpoint}/v1/traces` (https://otlp.arize.com; EU
 * https://otlp.eu-west-1a.arize.com), the space id and API key as headers (`space_id`/`api_key`,
 * and their newer `arize-space-id`/`arize-api-key` names), and the project as the resource attributes
 * `openinference.project.name` and `model_id` (the config's `modelId`). Arize renders OpenInference
 * attributes, so each generation's root span also carries them (content only outside privacy mode).
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind, type GenerationView } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { type AnyValue, anyValue, otlpRequest, readOtlp, tracesUrl, withResourceAttributes, withSpanAttributes } from "./otlp.js"

export const ARIZE_ENDPOINT = "https://otlp.arize.com"

/** The OpenInference rendering of one generation (the LLM span of its trace). */
export const openInference = (g: GenerationView): Record<string, AnyValue> => {
  const out: Record<string, AnyValue> = {
    "openinference.span.kind": anyValue("LLM"),
    "llm.model_name": anyValue(g.upstreamModel || g.model),
    "llm.provider": anyValue(g.provider),
    "llm.token_count.prompt": anyValue(g.inputTokens),
    "llm.token_count.completion": anyValue(g.outputTokens),
    "llm.token_count.total": anyValue(g.inputTokens + g.outputTokens),
    metadata: anyValue(JSON.stringify(g.metadata)),
  }
  if (g.sessionId !== null) out["session.id"] = anyValue(g.sessionId)
  if (g.user !== null) out["user.id"] = anyValue(g.user)
  if (g.cost !== undefined) out["llm.cost.total"] = anyValue(g.cost.total)
  if (g.input !== undefined) {
    out["input.value"] = anyValue(JSON.stringify(g.input))
    out["input.mime_type"] = anyValue("application/json")
    g.input.forEach((m, i) => {
      out[`llm.input_messages.${i}.message.role`] = anyValue(m.role)
      out[`llm.input_messages.${i}.message.content`] = anyValue(m.content)
    })
  }
  if (g.output !== undefined) {
    out["output.value"] = anyValue(g.output)
    out["output.mime_type"] = anyValue("text/plain")
    out["llm.output_messages.0.message.role"] = anyValue("assistant")
    out["llm.output_messages.0.message.content"] = anyValue(g.output)
  }
  return out
}

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, spaceKey: ConfigText, modelId: ConfigText, endpoint: Schema.optional(ConfigUrl) })

export const arize = defineKind({
  kind: "arize",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => {
      const roots = new Map(batch.generations.map((g) => [`${g.traceId}/${g.spanId}`, g]))
      const withProject = withResourceAttributes(readOtlp(batch.otlp), {
        "openinference.project.name": anyValue(config.modelId),
        model_id: anyValue(config.modelId),
      })
      const otlp = withSpanAttributes(withProject, (span) => {
        const g = roots.get(`${span.traceId}/${span.spanId}`)
        return g === undefined ? undefined : openInference(g)
      })
      return {
        requests: [
          otlpRequest(
            tracesUrl(config.endpoint ?? ARIZE_ENDPOINT),
            {
              space_id: config.spaceKey,
              api_key: config.apiKey,
              "arize-space-id": config.spaceKey,
              "arize-api-key": config.apiKey,
            },
            otlp,
          ),
        ],
      }
    }),
})
