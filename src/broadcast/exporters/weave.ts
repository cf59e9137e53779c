/**
 * W&B Weave: OTLP traces (protobuf: the only encoding its endpoint takes) to
 * `{baseUrl}/otel/v1/traces` (https://trace.wandb.ai; dedicated or self-managed:
 * https://<subdomain>.wandb.io/traces). The API key goes as `wandb-api-key` and as Basic auth
 * `api:<key>`, and the project both ways Weave routes by: the `project_id: <entity>/<project>`
 * header and the resource attributes `wandb.entity` / `wandb.project`.
 */
import type { Exporter } from "../exporter.js"
import { basicAuth, withConfig } from "./vendor-config.js"
import { anyValue, otlpRequest, readOtlp, tracesUrl, withResourceAttributes } from "./otlp.js"

export const WEAVE_BASE_URL = "https://trace.wandb.ai"

export const weave: Exporter = {
  kind: "weave",
  deliver: (raw, batch) =>
    withConfig("weave", raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(`${(config.baseUrl ?? WEAVE_BASE_URL).replace(/\/+$/, "")}/otel`),
          {
            authorization: basicAuth("api", config.apiKey),
            "wandb-api-key": config.apiKey,
            project_id: `${config.entity}/${config.project}`,
          },
          withResourceAttributes(readOtlp(batch.otlp), {
            "wandb.entity": anyValue(config.entity),
            "wandb.project": anyValue(config.project),
          }),
        ),
      ],
    })),
}
