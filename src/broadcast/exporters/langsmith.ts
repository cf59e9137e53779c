/**
 * LangSmith: OTLP traces to `{endpoint}/otel/v1/traces` (https://api.smith.langchain.com; EU
 * https://eu.api.smith.langchain.com, or a self-hosted instance), the API key in `x-api-key` and
 * the project in `Langsmith-Project`. LangSmith reads the GenAI attributes; each generation's root
 * span also says it is an LLM run (`langsmith.span.kind`) with its trace name, session and user.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind, type GenerationView } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { type AnyValue, anyValue, otlpRequest, readOtlp, tracesUrl, withSpanAttributes } from "./otlp.js"

export const LANGSMITH_ENDPOINT = "https://api.smith.langchain.com"

const runAttributes = (g: GenerationView): Record<string, AnyValue> => ({
  "langsmith.span.kind": anyValue("llm"),
  "langsmith.trace.name": anyValue(g.traceName),
  ...(g.sessionId === null ? {} : { "langsmith.trace.session_id": anyValue(g.sessionId) }),
  ...(g.user === null ? {} : { "langsmith.metadata.user_id": anyValue(g.user) }),
})

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, project: Schema.optional(ConfigText), endpoint: Schema.optional(ConfigUrl) })

export const langsmith = defineKind({
  kind: "langsmith",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => {
      const roots = new Map(batch.generations.map((g) => [`${g.traceId}/${g.spanId}`, g]))
      const otlp = withSpanAttributes(readOtlp(batch.otlp), (span) => {
        const g = roots.get(`${span.traceId}/${span.spanId}`)
        return g === undefined ? undefined : runAttributes(g)
      })
      return {
        requests: [
          otlpRequest(
            tracesUrl(`${(config.endpoint ?? LANGSMITH_ENDPOINT).replace(/\/+$/, "")}/otel`),
            { "x-api-key": config.apiKey, ...(config.project === undefined ? {} : { "langsmith-project": config.project }) },
            otlp,
          ),
        ],
      }
    }),
})
