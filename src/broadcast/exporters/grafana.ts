/**
 * Grafana Cloud: OTLP traces to the stack's OTLP gateway (`https://otlp-gateway-<zone>.grafana.net/otlp`,
 * shown on the stack's OpenTelemetry tile), Basic auth of instance id and a `traces:write` token.
 * The zone cannot be derived from the instance id, so without `config.endpoint` there is nowhere to send.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { basicAuth, withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

/** `https://otlp-gateway-….grafana.net` → `…/otlp/v1/traces`; a base that already has `/otlp` or the full path is kept. */
export const grafanaTracesUrl = (endpoint: string): string => {
  const base = endpoint.replace(/\/+$/, "")
  if (base.endsWith("/v1/traces")) return base
  return tracesUrl(base.endsWith("/otlp") ? base : `${base}/otlp`)
}

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, instanceId: ConfigText, endpoint: Schema.optional(ConfigUrl) })

export const grafana = defineKind({
  kind: "grafana",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) =>
      config.endpoint === undefined
        ? {
            unsupported:
              "grafana needs config.endpoint: the OTLP gateway of your stack (https://otlp-gateway-<zone>.grafana.net/otlp, on the stack's OpenTelemetry tile)",
          }
        : {
            requests: [
              otlpRequest(
                grafanaTracesUrl(config.endpoint),
                { authorization: basicAuth(config.instanceId, config.apiKey) },
                readOtlp(batch.otlp),
              ),
            ],
          },
    ),
})
