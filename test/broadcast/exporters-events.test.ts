/**
 * The vendors that take generations as their own events: Datadog's LLM
 * Observability spans API and PostHog's `$ai_generation` events, sent to a loopback receiver.
 */
import { describe, expect, test } from "bun:test"
import { datadog } from "../../src/broadcast/exporters/datadog.js"
import { posthog } from "../../src/broadcast/exporters/posthog.js"
import { BATCH, CONTENT, deliverToLoopback, json, PRIVATE, type Received } from "./exporters-support.js"

describe("datadog", () => {
  const deliver = async (config: Record<string, unknown>) => {
    const received = await deliverToLoopback(await datadog.deliver(config, BATCH))
    expect(received).toHaveLength(1)
    return received[0] as Received
  }

  test("posts to api.datadoghq.com/api/intake/llm-obs/v1/trace/spans with DD-API-KEY and JSON", async () => {
    const r = await deliver({ apiKey: "dd-key", mlApp: "gateway" })
    expect(r.intendedUrl).toBe("https://api.datadoghq.com/api/intake/llm-obs/v1/trace/spans")
    expect(r.method).toBe("POST")
    expect(r.headers.get("dd-api-key")).toBe("dd-key")
    expect(r.headers.get("content-type")).toBe("application/json")
  })

  test("site selects the region's intake", async () => {
    expect((await deliver({ apiKey: "k", mlApp: "a", site: "datadoghq.eu" })).intendedUrl).toBe(
      "https://api.datadoghq.eu/api/intake/llm-obs/v1/trace/spans",
    )
  })

  test("one llm span per generation under ml_app, with ids, nanosecond times, model, tokens, content and status", async () => {
    const body = json(await deliver({ apiKey: "k", mlApp: "gateway" }))
    expect(body.data.type).toBe("span")
    expect(body.data.attributes.ml_app).toBe("gateway")
    const [a, b] = body.data.attributes.spans
    expect(a.trace_id).toBe(CONTENT.traceId)
    expect(a.span_id).toBe(BigInt(`0x${CONTENT.spanId}`).toString())
    expect(a.parent_id).toBe("undefined")
    expect(a.name).toBe("answer")
    expect(a.start_ns).toBe(CONTENT.startMs * 1_000_000)
    expect(a.duration).toBe(1_500_000_000)
    expect(a.status).toBe("ok")
    expect(a.session_id).toBe("sess-42")
    expect(a.meta.kind).toBe("llm")
    expect(a.meta.metadata).toMatchObject({ model_name: "gpt-4o-mini-2024-07-18", model_provider: "openai", env: "test" })
    expect(a.meta.input.messages).toEqual(CONTENT.input)
    expect(a.meta.output.messages).toEqual([{ role: "assistant", content: "Hello!" }])
    expect(a.metrics).toEqual({ input_tokens: 12, output_tokens: 7, total_tokens: 19, estimated_total_cost: 0.000021 })
    expect(a.tags).toContain("user_id:user-7")
    expect(b.parent_id).toBe(BigInt(`0x${PRIVATE.parentSpanId}`).toString())
    expect(b.status).toBe("error")
    expect(b.meta.error.message).toBe("upstream failed")
  })

  test("privacy mode: the private generation's span has no input or output", async () => {
    const [, b] = json(await deliver({ apiKey: "k", mlApp: "gateway" })).data.attributes.spans
    expect(b.meta.input).toBeUndefined()
    expect(b.meta.output).toBeUndefined()
    expect(b.metrics.input_tokens).toBe(30)
  })
})

describe("posthog", () => {
  const deliver = async (config: Record<string, unknown>) => {
    const received = await deliverToLoopback(await posthog.deliver(config, BATCH))
    expect(received).toHaveLength(1)
    return received[0] as Received
  }

  test("posts to us.i.posthog.com/batch/ with the project key in the body", async () => {
    const r = await deliver({ apiKey: "phc_key" })
    expect(r.intendedUrl).toBe("https://us.i.posthog.com/batch/")
    expect(r.headers.get("content-type")).toBe("application/json")
    const body = json(r)
    expect(body.api_key).toBe("phc_key")
    expect(body.batch).toHaveLength(2)
  })

  test("host selects the EU cloud or a self-hosted instance", async () => {
    expect((await deliver({ apiKey: "k", host: "https://eu.i.posthog.com" })).intendedUrl).toBe("https://eu.i.posthog.com/batch/")
  })

  test("each generation is an $ai_generation event with trace, model, tokens, latency, cost and content", async () => {
    const [a] = json(await deliver({ apiKey: "k" })).batch
    expect(a.event).toBe("$ai_generation")
    expect(a.timestamp).toBe(CONTENT.createdAt)
    expect(a.uuid).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/)
    expect(a.properties).toMatchObject({
      distinct_id: "user-7",
      $ai_trace_id: CONTENT.traceId,
      $ai_span_id: CONTENT.spanId,
      $ai_session_id: "sess-42",
      $ai_model: "gpt-4o-mini-2024-07-18",
      $ai_provider: "openai",
      $ai_input_tokens: 12,
      $ai_output_tokens: 7,
      $ai_latency: 1.5,
      $ai_stream: true,
      $ai_is_error: false,
      $ai_total_cost_usd: 0.000021,
      $ai_input: CONTENT.input,
      $ai_output_choices: [{ role: "assistant", content: "Hello!" }],
      env: "test",
    })
  })

  test("a repeated delivery is the same event (the uuid derives from the generation id)", async () => {
    const first = json(await deliver({ apiKey: "k" })).batch.map((e: { uuid: string }) => e.uuid)
    const again = json(await deliver({ apiKey: "k" })).batch.map((e: { uuid: string }) => e.uuid)
    expect(again).toEqual(first)
    expect(new Set(first).size).toBe(2)
  })

  test("privacy mode: no $ai_input or $ai_output_choices; no user: the trace id is the distinct id, without a person profile", async () => {
    const [, b] = json(await deliver({ apiKey: "k" })).batch
    expect(b.properties.$ai_input).toBeUndefined()
    expect(b.properties.$ai_output_choices).toBeUndefined()
    expect(b.properties.distinct_id).toBe(PRIVATE.traceId)
    expect(b.properties.$process_person_profile).toBe(false)
    expect(b.properties.$ai_is_error).toBe(true)
    expect(b.properties.$ai_http_status).toBe(502)
    expect(b.properties.$ai_parent_id).toBe(PRIVATE.parentSpanId)
    expect(b.properties.$ai_total_cost_usd).toBeUndefined()
  })
})
