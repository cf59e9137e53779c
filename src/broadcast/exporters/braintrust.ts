/**
 * Braintrust: OTLP traces to `{apiUrl}/otel/v1/traces` (https://api.braintrust.dev, or
 * https://api-eu.braintrust.dev / a self-hosted data plane), Bearer API key, and the project the
 * spans land in as `x-bt-parent: project_id:<id>`. Braintrust reads the GenAI attributes itself.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

export const BRAINTRUST_API_URL = "https://api.braintrust.dev"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, projectId: ConfigText, apiUrl: Schema.optional(ConfigUrl) })

export const braintrust = defineKind({
  kind: "braintrust",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(`${(config.apiUrl ?? BRAINTRUST_API_URL).replace(/\/+$/, "")}/otel`),
          { authorization: `Bearer ${config.apiKey}`, "x-bt-parent": `project_id:${config.projectId}` },
          readOtlp(batch.otlp),
        ),
      ],
    })),
})
