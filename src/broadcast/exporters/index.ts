/**
 * The exporter registry: one file per destination kind, listed here. A kind with no exporter
 * keeps its CRUD, its `/test` answers 400 and its deliveries are dead with the reason below.
 */
import { DESTINATION_TYPES, type DestinationType } from "../../domain/destinations.js"
import type { Exporter } from "../exporter.js"
import { langfuse } from "./langfuse.js"
import { otelCollector } from "./otel-collector.js"
import { VENDOR_EXPORTERS } from "./vendors.js"
import { webhook } from "./webhook.js"

export const EXPORTERS: ReadonlyMap<string, Exporter> = new Map(
  [otelCollector, webhook, langfuse, ...VENDOR_EXPORTERS].map((e) => [e.kind, e]),
)

/** The kind's exporter, or why it has none. */
export const exporterFor = (kind: DestinationType): Exporter | { readonly unsupported: string } =>
  EXPORTERS.get(kind) ?? {
    unsupported: `delivery to ${kind} destinations is not supported by this gateway (its ingest format is not implemented)`,
  }

/** The kinds that deliver. */
export const supportedKinds = (): ReadonlyArray<DestinationType> => DESTINATION_TYPES.filter((t) => EXPORTERS.has(t))
