/**
 * The vendors that take OTLP traces: each exporter's request goes to a loopback
 * receiver, which checks the vendor's path, auth headers and content type, and decodes the
 * protobuf body with a reader independent of the production code: it is the batch's OTLP trace
 * (every span, attribute and id), plus only the attributes the vendor routes or renders by.
 */
import { describe, expect, test } from "bun:test"
import { arize } from "../../src/broadcast/exporters/arize.js"
import { braintrust } from "../../src/broadcast/exporters/braintrust.js"
import { grafana } from "../../src/broadcast/exporters/grafana.js"
import { langsmith } from "../../src/broadcast/exporters/langsmith.js"
import { newrelic } from "../../src/broadcast/exporters/newrelic.js"
import { opik } from "../../src/broadcast/exporters/opik.js"
import { sentry } from "../../src/broadcast/exporters/sentry.js"
import { weave } from "../../src/broadcast/exporters/weave.js"
import type { Exporter } from "../../src/broadcast/exporter.js"
import {
  ATTEMPT_SPAN,
  allSpans,
  BATCH,
  CONTENT,
  deliverToLoopback,
  type NormalTrace,
  normalJson,
  normalProtobuf,
  PRIVATE,
  type Received,
} from "./exporters-support.js"

const fixture = normalJson(BATCH.otlp)

/** Sends `exporter`'s delivery of the fixed batch to the loopback; its one request and decoded OTLP body. */
const deliverOne = async (exporter: Exporter, config: Record<string, unknown>) => {
  const received = await deliverToLoopback(await exporter.deliver(config, BATCH))
  expect(received).toHaveLength(1)
  const request = received[0] as Received
  expect(request.method).toBe("POST")
  expect(request.headers.get("content-type")).toBe("application/x-protobuf")
  return { request, otlp: normalProtobuf(request.body) }
}

/** `trace` without the given extra attributes: what must be left is exactly the batch's trace. */
const without = (trace: NormalTrace, resourceKeys: ReadonlyArray<string>, spanKeys: ReadonlyArray<string>): NormalTrace => ({
  resourceSpans: trace.resourceSpans.map((rs) => ({
    resource: Object.fromEntries(Object.entries(rs.resource).filter(([k]) => !resourceKeys.includes(k))),
    scopeSpans: rs.scopeSpans.map((ss) => ({
      ...ss,
      spans: ss.spans.map((s) => ({
        ...s,
        attributes: Object.fromEntries(Object.entries(s.attributes).filter(([k]) => !spanKeys.includes(k))),
      })),
    })),
  })),
})

const spanOf = (trace: NormalTrace, spanId: string) => {
  const span = allSpans(trace).find((s) => s.spanId === spanId)
  if (span === undefined) throw new Error(`no span ${spanId}`)
  return span
}

describe("OTLP payload", () => {
  test("the protobuf body carries the batch's trace unchanged: both generations, root and attempt spans, ids, times, attributes", async () => {
    const { otlp } = await deliverOne(braintrust, { apiKey: "bt-key", projectId: "proj-1" })
    expect(otlp).toEqual(fixture)
    expect(allSpans(otlp)).toHaveLength(4)
    const root = spanOf(otlp, CONTENT.spanId)
    expect(root.traceId).toBe(CONTENT.traceId)
    expect(root.attributes["gen_ai.response.id"]).toBe(CONTENT.id)
    expect(root.attributes["gen_ai.response.finish_reasons"]).toEqual(["stop"])
    expect(root.attributes["gen_ai.usage.input_tokens"]).toBe(12)
    expect(spanOf(otlp, ATTEMPT_SPAN[CONTENT.traceId]).parentSpanId).toBe(CONTENT.spanId)
    expect(spanOf(otlp, PRIVATE.spanId).parentSpanId).toBe(PRIVATE.parentSpanId)
    expect(spanOf(otlp, PRIVATE.spanId).status).toEqual({ code: 2, message: "upstream failed" })
  })

  test("privacy mode: the private generation's spans carry no prompt or completion", async () => {
    const { otlp } = await deliverOne(braintrust, { apiKey: "bt-key", projectId: "proj-1" })
    expect(spanOf(otlp, CONTENT.spanId).attributes["gen_ai.input.messages"]).toBe(JSON.stringify(CONTENT.input))
    for (const span of allSpans(otlp).filter((s) => s.traceId === PRIVATE.traceId)) {
      expect(Object.keys(span.attributes).filter((k) => k.includes("messages"))).toEqual([])
    }
  })
})

describe("braintrust", () => {
  test("posts to api.braintrust.dev/otel/v1/traces with Bearer key and x-bt-parent project_id", async () => {
    const { request } = await deliverOne(braintrust, { apiKey: "bt-key", projectId: "proj-1" })
    expect(request.intendedUrl).toBe("https://api.braintrust.dev/otel/v1/traces")
    expect(request.path).toBe("/otel/v1/traces")
    expect(request.headers.get("authorization")).toBe("Bearer bt-key")
    expect(request.headers.get("x-bt-parent")).toBe("project_id:proj-1")
  })

  test("apiUrl points at the EU or a self-hosted data plane", async () => {
    const { request } = await deliverOne(braintrust, { apiKey: "k", projectId: "p", apiUrl: "https://api-eu.braintrust.dev/" })
    expect(request.intendedUrl).toBe("https://api-eu.braintrust.dev/otel/v1/traces")
  })
})

describe("langsmith", () => {
  test("posts to api.smith.langchain.com/otel/v1/traces with x-api-key and Langsmith-Project", async () => {
    const { request } = await deliverOne(langsmith, { apiKey: "lsv2_pt_key", project: "gateway" })
    expect(request.intendedUrl).toBe("https://api.smith.langchain.com/otel/v1/traces")
    expect(request.headers.get("x-api-key")).toBe("lsv2_pt_key")
    expect(request.headers.get("langsmith-project")).toBe("gateway")
  })

  test("without a project no project header is sent; endpoint selects the EU region or a self-hosted instance", async () => {
    const { request } = await deliverOne(langsmith, { apiKey: "k", endpoint: "https://eu.api.smith.langchain.com" })
    expect(request.intendedUrl).toBe("https://eu.api.smith.langchain.com/otel/v1/traces")
    expect(request.headers.has("langsmith-project")).toBe(false)
  })

  test("each generation's root span is marked an LLM run with its trace name, session and user; nothing else changes", async () => {
    const { otlp } = await deliverOne(langsmith, { apiKey: "k" })
    const root = spanOf(otlp, CONTENT.spanId)
    expect(root.attributes["langsmith.span.kind"]).toBe("llm")
    expect(root.attributes["langsmith.trace.name"]).toBe("support-chat")
    expect(root.attributes["langsmith.trace.session_id"]).toBe("sess-42")
    expect(root.attributes["langsmith.metadata.user_id"]).toBe("user-7")
    expect(spanOf(otlp, PRIVATE.spanId).attributes["langsmith.trace.session_id"]).toBeUndefined()
    expect(spanOf(otlp, ATTEMPT_SPAN[CONTENT.traceId]).attributes["langsmith.span.kind"]).toBeUndefined()
    const added = ["langsmith.span.kind", "langsmith.trace.name", "langsmith.trace.session_id", "langsmith.metadata.user_id"]
    expect(without(otlp, [], added)).toEqual(fixture)
  })
})

describe("sentry", () => {
  test("posts to the project's OTLP endpoint with x-sentry-auth carrying the DSN's public key", async () => {
    const { request } = await deliverOne(sentry, {
      dsn: "https://abc123publickey@o11.ingest.us.sentry.io/4505",
      otlpEndpoint: "https://o11.ingest.us.sentry.io/api/4505/integration/otlp",
    })
    expect(request.intendedUrl).toBe("https://o11.ingest.us.sentry.io/api/4505/integration/otlp/v1/traces")
    expect(request.headers.get("x-sentry-auth")).toBe("sentry sentry_key=abc123publickey")
  })

  test("an endpoint already ending in /v1/traces is used as given", async () => {
    const { request } = await deliverOne(sentry, {
      dsn: "https://k@o1.ingest.sentry.io/2",
      otlpEndpoint: "https://o1.ingest.sentry.io/api/2/integration/otlp/v1/traces",
    })
    expect(request.intendedUrl).toBe("https://o1.ingest.sentry.io/api/2/integration/otlp/v1/traces")
  })
})

describe("arize", () => {
  const config = { apiKey: "ak-key", spaceKey: "U3BhY2U6MQ==", modelId: "gateway-prod" }

  test("posts to otlp.arize.com/v1/traces with the space id and API key headers", async () => {
    const { request } = await deliverOne(arize, config)
    expect(request.intendedUrl).toBe("https://otlp.arize.com/v1/traces")
    expect(request.headers.get("space_id")).toBe("U3BhY2U6MQ==")
    expect(request.headers.get("api_key")).toBe("ak-key")
    expect(request.headers.get("arize-space-id")).toBe("U3BhY2U6MQ==")
    expect(request.headers.get("arize-api-key")).toBe("ak-key")
  })

  test("the project is the modelId, as resource attributes; root spans carry OpenInference LLM attributes", async () => {
    const { otlp } = await deliverOne(arize, config)
    for (const rs of otlp.resourceSpans) {
      expect(rs.resource["openinference.project.name"]).toBe("gateway-prod")
      expect(rs.resource["model_id"]).toBe("gateway-prod")
      expect(rs.resource["service.name"]).toBe("gateway")
    }
    const root = spanOf(otlp, CONTENT.spanId).attributes
    expect(root["openinference.span.kind"]).toBe("LLM")
    expect(root["llm.model_name"]).toBe("gpt-4o-mini-2024-07-18")
    expect(root["llm.token_count.total"]).toBe(19)
    expect(root["llm.input_messages.1.message.content"]).toBe("Say hello")
    expect(root["output.value"]).toBe("Hello!")
    expect(root["session.id"]).toBe("sess-42")
    expect(JSON.parse(root["metadata"] as string)).toEqual({ env: "test", team: "blue" })
  })

  test("privacy mode: the private generation's OpenInference attributes have no input or output", async () => {
    const { otlp } = await deliverOne(arize, config)
    const root = spanOf(otlp, PRIVATE.spanId).attributes
    expect(root["openinference.span.kind"]).toBe("LLM")
    expect(root["llm.token_count.prompt"]).toBe(30)
    expect(Object.keys(root).filter((k) => k.startsWith("input.") || k.startsWith("output.") || k.includes("_messages."))).toEqual([])
  })
})

describe("grafana", () => {
  test("posts to the stack's OTLP gateway /otlp/v1/traces with Basic instanceId:apiKey", async () => {
    const { request } = await deliverOne(grafana, {
      apiKey: "glc_token",
      instanceId: "123456",
      endpoint: "https://otlp-gateway-prod-eu-west-2.grafana.net",
    })
    expect(request.intendedUrl).toBe("https://otlp-gateway-prod-eu-west-2.grafana.net/otlp/v1/traces")
    expect(request.headers.get("authorization")).toBe(`Basic ${Buffer.from("123456:glc_token").toString("base64")}`)
  })

  test("an endpoint given with /otlp is not doubled", async () => {
    const { request } = await deliverOne(grafana, {
      apiKey: "k",
      instanceId: "1",
      endpoint: "https://otlp-gateway-prod-us-east-0.grafana.net/otlp",
    })
    expect(request.intendedUrl).toBe("https://otlp-gateway-prod-us-east-0.grafana.net/otlp/v1/traces")
  })

  test("without an endpoint there is no zone to send to: unsupported, naming config.endpoint", async () => {
    const delivery = await grafana.deliver({ apiKey: "k", instanceId: "1" }, BATCH)
    expect("unsupported" in delivery && delivery.unsupported).toContain("config.endpoint")
  })
})

describe("newrelic", () => {
  test("posts to otlp.nr-data.net/v1/traces with the license key as api-key", async () => {
    const { request } = await deliverOne(newrelic, { licenseKey: "nr-license" })
    expect(request.intendedUrl).toBe("https://otlp.nr-data.net/v1/traces")
    expect(request.headers.get("api-key")).toBe("nr-license")
  })

  test("region eu goes to otlp.eu01.nr-data.net", async () => {
    const { request } = await deliverOne(newrelic, { licenseKey: "nr-license", region: "eu" })
    expect(request.intendedUrl).toBe("https://otlp.eu01.nr-data.net/v1/traces")
  })
})

describe("opik", () => {
  test("posts to Opik Cloud's otel endpoint with Authorization, Comet-Workspace and projectName", async () => {
    const { request } = await deliverOne(opik, { apiKey: "opik-key", projectName: "gateway", workspace: "acme" })
    expect(request.intendedUrl).toBe("https://www.comet.com/opik/api/v1/private/otel/v1/traces")
    expect(request.headers.get("authorization")).toBe("opik-key")
    expect(request.headers.get("comet-workspace")).toBe("acme")
    expect(request.headers.get("projectname")).toBe("gateway")
  })

  test("baseUrl selects a self-hosted Opik", async () => {
    const { request } = await deliverOne(opik, { apiKey: "k", projectName: "p", workspace: "w", baseUrl: "http://opik.internal:5173/api" })
    expect(request.intendedUrl).toBe("http://opik.internal:5173/api/v1/private/otel/v1/traces")
  })
})

describe("weave", () => {
  test("posts protobuf to trace.wandb.ai/otel/v1/traces with the key (header and Basic api:key) and project_id entity/project", async () => {
    const { request, otlp } = await deliverOne(weave, { apiKey: "wandb-key", entity: "acme", project: "gateway" })
    expect(request.intendedUrl).toBe("https://trace.wandb.ai/otel/v1/traces")
    expect(request.headers.get("wandb-api-key")).toBe("wandb-key")
    expect(request.headers.get("authorization")).toBe(`Basic ${Buffer.from("api:wandb-key").toString("base64")}`)
    expect(request.headers.get("project_id")).toBe("acme/gateway")
    expect(otlp.resourceSpans[0]?.resource["wandb.entity"]).toBe("acme")
    expect(otlp.resourceSpans[0]?.resource["wandb.project"]).toBe("gateway")
    expect(without(otlp, ["wandb.entity", "wandb.project"], [])).toEqual(fixture)
  })
})
