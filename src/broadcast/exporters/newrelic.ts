/**
 * New Relic: its native OTLP endpoint in the recommended encoding (OTLP/HTTP binary protobuf),
 * `https://otlp.nr-data.net/v1/traces` (US, the default) or `https://otlp.eu01.nr-data.net/v1/traces`
 * (`region: "eu"`), the license key in the `api-key` header.
 */
import { Schema } from "effect"
import { configLiteral, ConfigText } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp } from "./otlp.js"

export const NEWRELIC_ENDPOINTS = {
  us: "https://otlp.nr-data.net/v1/traces",
  eu: "https://otlp.eu01.nr-data.net/v1/traces",
} as const

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ licenseKey: ConfigText, region: Schema.optional(configLiteral(["us", "eu"])) })

export const newrelic = defineKind({
  kind: "newrelic",
  config: Config,
  secretFields: ["licenseKey"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [otlpRequest(NEWRELIC_ENDPOINTS[config.region ?? "us"], { "api-key": config.licenseKey }, readOtlp(batch.otlp))],
    })),
})
