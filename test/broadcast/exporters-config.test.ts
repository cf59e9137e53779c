/**
 * The destination kinds as a registry, and the config keys they added to the destination kinds
 * (docs/broadcast.md): optional, validated with a 400 naming the key and the rule, secrets masked.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { RAMP_UNSUPPORTED } from "../../src/broadcast/exporters/ramp.js"
import { DESTINATION_KINDS, DESTINATION_TYPES, REGISTERED_KINDS } from "../../src/broadcast/exporters/index.js"
import { decodeConfig, maskConfig } from "../../src/domain/destinations.js"
import { BATCH, kindOf, refusal } from "./exporters-support.js"

const accepted = (type: string, config: unknown) => Either.isRight(decodeConfig(kindOf(type), config))

describe("DESTINATION_KINDS", () => {
  test("one module for each of the 17 kinds, each with its config Schema and its exporter, in the API's order", () => {
    expect(DESTINATION_TYPES).toEqual([
      "langfuse",
      "webhook",
      "otel-collector",
      "datadog",
      "langsmith",
      "posthog",
      "s3",
      "sentry",
      "clickhouse",
      "arize",
      "braintrust",
      "grafana",
      "newrelic",
      "opik",
      "ramp",
      "snowflake",
      "weave",
    ])
    expect(REGISTERED_KINDS.size).toBe(17)
    for (const kind of DESTINATION_KINDS) {
      expect(typeof kind.deliver).toBe("function")
      expect(kind.config.ast._tag).toBe("TypeLiteral")
    }
  })

  test("ramp is not delivered: its ingest API is not publicly documented, and it says so", async () => {
    const ramp = DESTINATION_KINDS.find((e) => e.kind === "ramp")
    expect(await ramp?.deliver({ apiKey: "ramp-key" }, BATCH)).toEqual({ unsupported: RAMP_UNSUPPORTED })
    expect(RAMP_UNSUPPORTED).toContain("not publicly documented")
  })

  test("a stored config that no longer decodes is not delivered: unsupported, naming the key", async () => {
    const datadog = DESTINATION_KINDS.find((e) => e.kind === "datadog")
    const delivery = await datadog?.deliver({ apiKey: "k", mlApp: "app", site: "example.com" }, BATCH)
    expect(delivery && "unsupported" in delivery && delivery.unsupported).toStartWith("config.site: must be one of datadoghq.com")
  })
})

describe("config keys the exporters use", () => {
  test("s3 prefix, pathTemplate and sessionToken are optional settings; sessionToken is a secret", () => {
    const config = {
      accessKeyId: "AKIAEXAMPLE0001",
      secretAccessKey: "secret-access-key-01",
      bucketName: "traces",
      prefix: "gw",
      pathTemplate: "{prefix}/{date}/{traceId}-{timestamp}.json",
      sessionToken: "session-token-0123456789",
    }
    const decoded = decodeConfig(kindOf("s3"), config)
    expect(Either.isRight(decoded)).toBe(true)
    if (Either.isRight(decoded)) expect(maskConfig(kindOf("s3"), decoded.right).sessionToken).toBe("****6789")
  })

  test("s3 pathTemplate: unknown placeholders and templates without {traceId} or {generationId} are 400", () => {
    const base = { accessKeyId: "a", secretAccessKey: "b", bucketName: "traces" }
    expect(refusal("s3", { ...base, pathTemplate: "{prefix}/{hour}/{traceId}.json" })).toContain("config.pathTemplate: {hour} is not a placeholder")
    expect(refusal("s3", { ...base, pathTemplate: "{prefix}/{date}.json" })).toContain("config.pathTemplate: must contain {traceId} or {generationId}")
  })

  test("names that become part of a host are checked: s3 bucket and region, snowflake account", () => {
    const base = { accessKeyId: "a", secretAccessKey: "b" }
    expect(refusal("s3", { ...base, bucketName: "evil.example#" })).toContain("config.bucketName: must be an S3 bucket name")
    expect(refusal("s3", { ...base, bucketName: "traces", region: "x/y" })).toContain("config.region:")
    expect(refusal("snowflake", { account: "evil.example/x?", token: "t" })).toContain("config.account:")
    expect(accepted("snowflake", { account: "xy12345.us-east-1", token: "t", database: "AI", table: "T" })).toBe(true)
  })

  test("datadog site, newrelic region and snowflake tokenType take only their documented values", () => {
    expect(accepted("datadog", { apiKey: "k", mlApp: "a", site: "us5.datadoghq.com" })).toBe(true)
    expect(refusal("datadog", { apiKey: "k", mlApp: "a", site: "datadoghq.evil" })).toContain("config.site: must be one of")
    expect(refusal("newrelic", { licenseKey: "k", region: "asia" })).toContain("config.region: must be one of us, eu")
    expect(refusal("snowflake", { account: "a", token: "t", tokenType: "PASSWORD" })).toContain("config.tokenType:")
  })

  test("sentry dsn must carry its public key; clickhouse host is a URL or host[:port]", () => {
    expect(refusal("sentry", { dsn: "https://o1.ingest.sentry.io/2", otlpEndpoint: "https://o1.ingest.sentry.io/x" })).toContain(
      "config.dsn: must be a Sentry DSN",
    )
    const ch = { database: "d", username: "u", password: "p" }
    expect(accepted("clickhouse", { ...ch, host: "abc.clickhouse.cloud:8443", table: "t" })).toBe(true)
    expect(refusal("clickhouse", { ...ch, host: "abc/../x" })).toContain("config.host:")
  })

  test("the regional or self-hosted endpoints are optional URLs", () => {
    expect(accepted("grafana", { apiKey: "k", instanceId: "1", endpoint: "https://otlp-gateway-prod-eu-west-2.grafana.net/otlp" })).toBe(true)
    expect(refusal("grafana", { apiKey: "k", instanceId: "1", endpoint: "otlp-gateway" })).toContain("config.endpoint: must be an http(s) URL")
    expect(accepted("langsmith", { apiKey: "k", endpoint: "https://eu.api.smith.langchain.com" })).toBe(true)
    expect(accepted("posthog", { apiKey: "k", host: "https://eu.i.posthog.com" })).toBe(true)
    expect(accepted("arize", { apiKey: "k", spaceKey: "s", modelId: "m", endpoint: "https://otlp.eu-west-1a.arize.com" })).toBe(true)
    expect(accepted("braintrust", { apiKey: "k", projectId: "p", apiUrl: "https://api-eu.braintrust.dev" })).toBe(true)
    expect(accepted("opik", { apiKey: "k", projectName: "p", workspace: "w", baseUrl: "http://localhost:5173/api" })).toBe(true)
    expect(accepted("weave", { apiKey: "k", entity: "e", project: "p", baseUrl: "https://acme.wandb.io/traces" })).toBe(true)
    expect(refusal("ramp", { apiKey: "k", baseUrl: "https://x" })).toContain("config.baseUrl: unknown key")
  })
})
