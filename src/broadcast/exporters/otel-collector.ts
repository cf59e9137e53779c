/** `otel-collector`: OTLP/HTTP JSON to `{endpoint}/v1/traces` (an endpoint already ending so is used as is), with its `headers`. */
import { Schema } from "effect"
import { ConfigHeaders, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { headersOf, stringOf } from "./config.js"

export const tracesUrl = (endpoint: string): string => {
  const base = endpoint.replace(/\/+$/, "")
  return base.endsWith("/v1/traces") ? base : `${base}/v1/traces`
}

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ endpoint: ConfigUrl, headers: Schema.optional(ConfigHeaders) })

export const otelCollector = defineKind({
  kind: "otel-collector",
  config: Config,
  secretFields: [],
  // Secret value by value: auth headers live there.
  secretMaps: ["headers"],
  deliver: async (config, batch) => ({
    requests: [
      {
        url: tracesUrl(stringOf(config, "endpoint")),
        method: "POST",
        headers: { ...headersOf(config), "content-type": "application/json" },
        body: batch.otlpJson,
      },
    ],
  }),
})
