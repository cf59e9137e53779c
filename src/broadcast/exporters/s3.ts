/**
 * S3 and S3-compatible stores (R2, MinIO, …): one JSON object per generation's trace, PUT and signed
 * with AWS Signature V4 (aws4fetch). The object is that trace's OTLP/HTTP JSON request (its spans
 * only). Its key is `{prefix}/{date}/{traceId}-{timestamp}.json` (`pathTemplate` changes it);
 * `{timestamp}` is the generation's start in epoch ms, so a repeated delivery overwrites the same
 * object. With `endpoint` the URL is path-style (`{endpoint}/{bucket}/{key}`); without, AWS's
 * virtual-hosted style in `region` (default us-east-1).
 */
import { createHash } from "node:crypto"
import { AwsV4Signer } from "aws4fetch"
import { Schema } from "effect"
import { ConfigText, ConfigUrl } from "../../domain/destinations.js"
import { defineKind, type GenerationView, type OutboundRequest } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { generationSpans, readOtlp, type TraceRequest } from "./otlp.js"

export const S3_DEFAULT_PATH = "{prefix}/{date}/{traceId}-{timestamp}.json"

const pad = (n: number) => String(n).padStart(2, "0")

/** The object key of `g` under `template`: placeholders filled, empty segments (no prefix) dropped. */
export const s3Key = (g: GenerationView, template: string, prefix: string): string => {
  const d = new Date(g.startMs)
  const [year, month, day] = [String(d.getUTCFullYear()), pad(d.getUTCMonth() + 1), pad(d.getUTCDate())]
  const values: Record<string, string> = {
    prefix: prefix.replace(/^\/+|\/+$/g, ""),
    date: `${year}-${month}-${day}`,
    year,
    month,
    day,
    traceId: g.traceId,
    generationId: g.id,
    timestamp: String(Math.round(g.startMs)),
  }
  return template
    .replace(/\{([A-Za-z]+)\}/g, (whole, name: string) => values[name] ?? whole)
    .split("/")
    .filter((segment) => segment !== "")
    .join("/")
}

const encodeKey = (key: string) => key.split("/").map(encodeURIComponent).join("/")

/** Where the object goes: path-style under a custom endpoint, else AWS virtual-hosted (path-style for dotted names). */
export const s3ObjectUrl = (bucket: string, key: string, region: string, endpoint: string | undefined): string => {
  if (endpoint !== undefined) return `${endpoint.replace(/\/+$/, "")}/${bucket}/${encodeKey(key)}`
  return bucket.includes(".")
    ? `https://s3.${region}.amazonaws.com/${bucket}/${encodeKey(key)}`
    : `https://${bucket}.s3.${region}.amazonaws.com/${encodeKey(key)}`
}

const sha256Hex = (body: Uint8Array) => createHash("sha256").update(body).digest("hex")

/** `{traceId}`-like placeholders an S3 `pathTemplate` may use. */
export const S3_PATH_PLACEHOLDERS = ["prefix", "date", "year", "month", "day", "traceId", "generationId", "timestamp"] as const

const S3PathTemplate = ConfigText.pipe(
  Schema.filter((template) => {
    const unknown = [...template.matchAll(/\{([^}]*)\}/g)].map((m) => m[1]).find((name) => !(S3_PATH_PLACEHOLDERS as ReadonlyArray<string>).includes(name ?? ""))
    if (unknown !== undefined) return `{${unknown}} is not a placeholder (use ${S3_PATH_PLACEHOLDERS.map((p) => `{${p}}`).join(", ")})`
    if (!template.includes("{traceId}") && !template.includes("{generationId}")) return "must contain {traceId} or {generationId}, so traces do not overwrite each other"
    return true
  }),
)

// Names that become part of a host name must not be able to change the host (`evil.example#`).
const S3Bucket = ConfigText.pipe(
  Schema.filter((b) => /^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(b) || "must be an S3 bucket name (3-63 of a-z, 0-9, dot, hyphen)"),
)
const AwsRegion = ConfigText.pipe(Schema.filter((r) => /^[a-z0-9-]{1,32}$/.test(r) || "must be a region name like us-east-1 (a-z, 0-9, hyphen)"))

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({
  accessKeyId: ConfigText,
  secretAccessKey: ConfigText,
  bucketName: S3Bucket,
  region: Schema.optional(AwsRegion),
  endpoint: Schema.optional(ConfigUrl),
  prefix: Schema.optional(ConfigText),
  pathTemplate: Schema.optional(S3PathTemplate),
  sessionToken: Schema.optional(ConfigText),
})

export const s3 = defineKind({
  kind: "s3",
  config: Config,
  secretFields: ["accessKeyId", "secretAccessKey", "sessionToken"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, async (config) => {
      const otlp: TraceRequest = readOtlp(batch.otlp)
      const region = config.region ?? "us-east-1"
      const requests: Array<OutboundRequest> = []
      for (const g of batch.generations) {
        const body = new TextEncoder().encode(JSON.stringify(generationSpans(otlp, g.traceId, g.spanId)))
        const url = s3ObjectUrl(config.bucketName, s3Key(g, config.pathTemplate ?? S3_DEFAULT_PATH, config.prefix ?? ""), region, config.endpoint)
        const signed = await new AwsV4Signer({
          method: "PUT",
          url,
          headers: { "content-type": "application/json", "x-amz-content-sha256": sha256Hex(body) },
          body,
          accessKeyId: config.accessKeyId,
          secretAccessKey: config.secretAccessKey,
          sessionToken: config.sessionToken,
          service: "s3",
          region,
        }).sign()
        const headers: Record<string, string> = {}
        signed.headers.forEach((value, name) => {
          headers[name] = value
        })
        requests.push({ url: signed.url.toString(), method: "PUT", headers, body })
      }
      return { requests }
    }),
})
