/**
 * W&B Weave: OTLP traces (protobuf: the only encoding its endpoint takes) to
 * `{baseUrl}/otel/v1/traces` (https://trace.wandb.ai; dedicated or self-managed:
 * https://<subdomain>.wandb.io/traces). The API key goes as `wandb-api-key` and as Basic auth
 * `api:<key>`, and the project both ways Weave routes by: the `project_id: <entity>/<project>`
 * header and the resource attributes `wandb.entity` / `wandb.project`.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { basicAuth, withConfig } from "./vendor-config.js"
import { anyValue, otlpRequest, readOtlp, tracesUrl, withResourceAttributes } from "./otlp.js"

export const WEAVE_BASE_URL = "https://trace.wandb.ai"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText, entity: ConfigText, project: ConfigText, baseUrl: Schema.optional(ConfigUrl) })

export const weave = defineKind({
  kind: "weave",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
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
})
