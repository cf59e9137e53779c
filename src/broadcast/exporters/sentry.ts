/**
 * Sentry: OTLP traces to the project's OTLP traces endpoint (`config.otlpEndpoint`, shown under
 * Client Keys (DSN); `/v1/traces` is appended when the base is given), authenticated by the DSN's
 * public key in `x-sentry-auth: sentry sentry_key=<key>`.
 */
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { otlpRequest, readOtlp, tracesUrl } from "./otlp.js"

/** The public key of a DSN (`https://<key>@o1.ingest.sentry.io/2`). */
export const sentryPublicKey = (dsn: string): string => decodeURIComponent(new URL(dsn).username)

const isSentryDsn = (dsn: string) => {
  try {
    const u = new URL(dsn)
    return (u.protocol === "http:" || u.protocol === "https:") && u.username !== ""
  } catch {
    return false
  }
}
// The DSN embeds the project's key: a secret.
const SentryDsn = ConfigText.pipe(Schema.filter((d) => isSentryDsn(d) || "must be a Sentry DSN (https://<public key>@<host>/<project id>)"))

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({ dsn: SentryDsn, otlpEndpoint: ConfigUrl })

export const sentry = defineKind({
  kind: "sentry",
  config: Config,
  secretFields: ["dsn"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => ({
      requests: [
        otlpRequest(
          tracesUrl(config.otlpEndpoint),
          { "x-sentry-auth": `sentry sentry_key=${sentryPublicKey(config.dsn)}` },
          readOtlp(batch.otlp),
        ),
      ],
    })),
})
