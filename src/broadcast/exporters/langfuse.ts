/**
 * `langfuse`: Langfuse's OpenTelemetry endpoint, `{baseUrl}/api/public/otel/v1/traces` (default
 * https://cloud.langfuse.com), Basic auth of `publicKey:secretKey`, OTLP/HTTP JSON. Langfuse maps
 * the GenAI attributes, `session.id` and `user.id` itself; the root span names the trace.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { stringOf } from "./config.js"

export const LANGFUSE_CLOUD = "https://cloud.langfuse.com"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ publicKey: ConfigText, secretKey: ConfigText, baseUrl: Schema.optional(ConfigUrl) })

export const langfuse = defineKind({
  kind: "langfuse",
  config: Config,
  // The public key too: the reference samples show it masked.
  secretFields: ["publicKey", "secretKey"],
  secretMaps: [],
  deliver: async (config, batch) => {
    const base = (typeof config.baseUrl === "string" ? config.baseUrl : LANGFUSE_CLOUD).replace(/\/+$/, "")
    const auth = Buffer.from(`${stringOf(config, "publicKey")}:${stringOf(config, "secretKey")}`).toString("base64")
    return {
      requests: [
        {
          url: `${base}/api/public/otel/v1/traces`,
          method: "POST",
          headers: { authorization: `Basic ${auth}`, "content-type": "application/json" },
          body: batch.otlpJson,
        },
      ],
    }
  },
})
