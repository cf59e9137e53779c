/** `otel-collector`: OTLP/HTTP JSON to `{endpoint}/v1/traces` (an endpoint already ending so is used as is), with its `headers`. */
import type { Exporter } from "../exporter.js"
import { headersOf, stringOf } from "./config.js"

export const tracesUrl = (endpoint: string): string => {
  const base = endpoint.replace(/\/+$/, "")
  return base.endsWith("/v1/traces") ? base : `${base}/v1/traces`
}

export const otelCollector: Exporter = {
  kind: "otel-collector",
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
}
