/**
 * Sentry: OTLP traces to the project's OTLP traces endpoint (`config.otlpEndpoint`, shown under
 * Client Keys (DSN); `/v1/traces` is appended when the base is given), authenticated by the DSN's
 * public key in `x-sentry-auth: sentry sentry_key=<key>`.
 */
import type { Exporter } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

/** The public key of a DSN (`https://<key>@o1.ingest.sentry.io/2`). */
export const sentryPublicKey = (dsn: string): string => decodeURIComponent(new URL(dsn).username)

export const sentry: Exporter = {
  kind: "sentry",
  deliver: (raw, batch) =>
    withConfig("sentry", raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(config.otlpEndpoint),
          { "x-sentry-auth": `sentry sentry_key=${sentryPublicKey(config.dsn)}` },
          readOtlp(batch.otlp),
        ),
      ],
    })),
}
