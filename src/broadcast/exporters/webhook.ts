/** `webhook`: the OTLP/HTTP JSON body to `url` by `method` (POST unless PUT), with its `headers`. */
import { Schema } from "effect"
import { ConfigHeaders, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { headersOf, stringOf } from "./config.js"

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({
  url: ConfigUrl,
  method: Schema.optional(Schema.Literal("POST", "PUT").annotations({ message: () => ({ message: "must be POST or PUT", override: true }) })),
  headers: Schema.optional(ConfigHeaders),
})

export const webhook = defineKind({
  kind: "webhook",
  config: Config,
  secretFields: [],
  // Secret value by value: auth headers live there.
  secretMaps: ["headers"],
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
})
