/**
 * Ramp: not delivered. Ramp's AI-usage ingest (https://api.ramp.com/developer/v1/ai-usage/openrouter)
 * is a private integration for one gateway vendor; its path under that base, its encoding and how
 * the key is sent are not publicly documented, so nothing is sent rather than a guess.
 */
import { Schema } from "effect"
import { ConfigText } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"

export const RAMP_UNSUPPORTED =
  "ramp delivery is not supported: Ramp's AI-usage ingest API (its path, payload and auth header) is not publicly documented"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ apiKey: ConfigText })

export const ramp = defineKind({
  kind: "ramp",
  config: Config,
  secretFields: ["apiKey"],
  secretMaps: [],
  deliver: async () => ({ unsupported: RAMP_UNSUPPORTED }),
})
