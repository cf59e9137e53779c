/**
 * The vendor exporters (docs/broadcast.md): every destination kind other than otel-collector, webhook
 * and langfuse, one file each. The registry of all kinds imports this list.
 */
import type { Exporter } from "../exporter.js"
import { arize } from "./arize.js"
import { braintrust } from "./braintrust.js"
import { clickhouse } from "./clickhouse.js"
import { datadog } from "./datadog.js"
import { grafana } from "./grafana.js"
import { langsmith } from "./langsmith.js"
import { newrelic } from "./newrelic.js"
import { opik } from "./opik.js"
import { posthog } from "./posthog.js"
import { ramp } from "./ramp.js"
import { s3 } from "./s3.js"
import { sentry } from "./sentry.js"
import { snowflake } from "./snowflake.js"
import { weave } from "./weave.js"

export const VENDOR_EXPORTERS: ReadonlyArray<Exporter> = [
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
]
