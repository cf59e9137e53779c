/**
 * Comet Opik: OTLP traces to `{baseUrl}/v1/private/otel/v1/traces` (Opik Cloud's base is
 * https://www.comet.com/opik/api; self-hosted: http://<host>/api), with the API key as
 * `Authorization`, the workspace as `Comet-Workspace` and the project as `projectName`.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

export const OPIK_CLOUD_API = "https://www.comet.com/opik/api"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, projectName: ConfigText, workspace: ConfigText, baseUrl: Schema.optional(ConfigUrl) })

export const opik = defineKind({
  kind: "opik",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(`${(config.baseUrl ?? OPIK_CLOUD_API).replace(/\/+$/, "")}/v1/private/otel`),
          { authorization: config.apiKey, "comet-workspace": config.workspace, projectname: config.projectName },
          readOtlp(batch.otlp),
        ),
      ],
    })),
})
