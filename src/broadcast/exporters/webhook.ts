/** `webhook`: the OTLP/HTTP JSON body to `url` by `method` (POST unless PUT), with its `headers`. */
import type { Exporter } from "../exporter.js"
import { headersOf, stringOf } from "./config.js"

export const webhook: Exporter = {
  kind: "webhook",
  deliver: async (config, batch) => ({
    requests: [
      {
        url: stringOf(config, "url"),
        method: config.method === "PUT" ? "PUT" : "POST",
        headers: { ...headersOf(config), "content-type": "application/json" },
        body: batch.otlpJson,
      },
    ],
  }),
}
