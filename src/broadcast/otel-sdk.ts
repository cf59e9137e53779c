/**
 * OpenTelemetry's serializer and resource packages, loaded on first use: the protobuf exporters'
 * bodies and the encoder's comparison with the official serializer. Imported at start they cost
 * every process their ~200 modules (~80 ms of start-up from source, ~16,500 heap cells the
 * collector visits: bench/NOTES.md, "The collector") whether or not it ever sends OTLP protobuf.
 * `require` because their callers are synchronous (a body is built inside a send).
 */
import type * as Resources from "@opentelemetry/resources"
import type * as Transformer from "@opentelemetry/otlp-transformer"

let transformer: typeof Transformer | undefined
let resources: typeof Resources | undefined

/** `@opentelemetry/otlp-transformer`, loaded the first time it is asked for. */
export const otlpTransformer = (): typeof Transformer => {
  transformer ??= require("@opentelemetry/otlp-transformer") as typeof Transformer
  return transformer
}

/** `@opentelemetry/resources`, loaded the first time it is asked for. */
export const otelResources = (): typeof Resources => {
  resources ??= require("@opentelemetry/resources") as typeof Resources
  return resources
}
