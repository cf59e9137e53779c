/**
 * Comet Opik: OTLP traces to `{baseUrl}/v1/private/otel/v1/traces` (Opik Cloud's base is
 * https://www.comet.com/opik/api; self-hosted: http://<host>/api), with the API key as
 * `Authorization`, the workspace as `Comet-Workspace` and the project as `projectName`.
 */
import type { Exporter } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

export const OPIK_CLOUD_API = "https://www.comet.com/opik/api"

export const opik: Exporter = {
  kind: "opik",
  deliver: (raw, batch) =>
    withConfig("opik", raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(`${(config.baseUrl ?? OPIK_CLOUD_API).replace(/\/+$/, "")}/v1/private/otel`),
          { authorization: config.apiKey, "comet-workspace": config.workspace, projectname: config.projectName },
          readOtlp(batch.otlp),
        ),
      ],
    })),
}
