/**
 * The registry of destination kinds: one module per kind (its config Schema, its secret keys, its
 * exporter; src/broadcast/exporter.ts has the shape), one line here. The API's list of types, the
 * control plane's checks (through `DestinationKinds`), the delivery engine's exporters and the
 * console's forms are all derived from this list. A kind with no exporter of its own (ramp) says
 * why its deliveries are dead.
 */
import { Layer } from "effect"
import { DestinationKinds, type DestinationRules } from "../../domain/destinations.js"
import type { DestinationKind, Exporter } from "../exporter.js"
import { arize } from "./arize.js"
import { braintrust } from "./braintrust.js"
import { clickhouse } from "./clickhouse.js"
import { datadog } from "./datadog.js"
import { grafana } from "./grafana.js"
import { langfuse } from "./langfuse.js"
import { langsmith } from "./langsmith.js"
import { newrelic } from "./newrelic.js"
import { opik } from "./opik.js"
import { otelCollector } from "./otel-collector.js"
import { posthog } from "./posthog.js"
import { ramp } from "./ramp.js"
import { s3 } from "./s3.js"
import { sentry } from "./sentry.js"
import { snowflake } from "./snowflake.js"
import { weave } from "./weave.js"
import { webhook } from "./webhook.js"

/** In the order the API lists them ("must be one of …"). */
export const DESTINATION_KINDS = [
  langfuse,
  webhook,
  otelCollector,
  datadog,
  langsmith,
  posthog,
  s3,
  sentry,
  clickhouse,
  arize,
  braintrust,
  grafana,
  newrelic,
  opik,
  ramp,
  snowflake,
  weave,
] as const

export type DestinationType = (typeof DESTINATION_KINDS)[number]["kind"]

export const DESTINATION_TYPES: ReadonlyArray<DestinationType> = DESTINATION_KINDS.map((k) => k.kind)

/** Kinds by name (a name listed twice is a mistake in the list, refused at start). */
export const kindTable = (kinds: ReadonlyArray<DestinationKind>): ReadonlyMap<string, DestinationKind> => {
  const table = new Map<string, DestinationKind>()
  for (const kind of kinds) {
    if (table.has(kind.kind)) throw new Error(`destination kind ${kind.kind} is listed twice`)
    table.set(kind.kind, kind)
  }
  return table
}

/** The registry's kinds by name: what the delivery Worker sends with. */
export const REGISTERED_KINDS: ReadonlyMap<string, DestinationKind> = kindTable(DESTINATION_KINDS)

/**
 * The services' table of kinds (`DestinationKinds`): the registry's, or (the test kit) a list with
 * kinds of its own. Kinds beyond the registry's are delivered by the engine on the serving thread
 * only (the test kit's, `broadcast.in_thread`): the delivery Worker knows the registry's.
 */
export const destinationKindsLayer = (kinds: ReadonlyArray<DestinationKind> = DESTINATION_KINDS): Layer.Layer<DestinationKinds> =>
  Layer.sync(DestinationKinds, () => kindTable(kinds))

const isKind = (rules: DestinationRules): rules is DestinationKind => typeof (rules as Partial<Exporter>).deliver === "function"

/** The kind's exporter, or why it has none. */
export const exporterFor = (kinds: ReadonlyMap<string, DestinationRules>, type: string): Exporter | { readonly unsupported: string } => {
  const kind = kinds.get(type)
  return kind !== undefined && isKind(kind)
    ? kind
    : { unsupported: `delivery to ${type} destinations is not supported by this gateway (its ingest format is not implemented)` }
}
