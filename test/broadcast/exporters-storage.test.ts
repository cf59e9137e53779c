/**
 * The kinds that store generations: S3 objects signed with Signature V4 (checked by
 * recomputing the signature with aws4fetch's own signer), ClickHouse rows through its HTTP
 * interface and Snowflake rows through its SQL API (values only as rows or bind variables, never
 * in the SQL text), all sent to a loopback receiver.
 */
import { describe, expect, test } from "bun:test"
import { createHash } from "node:crypto"
import { AwsV4Signer } from "aws4fetch"
import { clickhouse } from "../../src/broadcast/exporters/clickhouse.js"
import { COLUMNS } from "../../src/broadcast/exporters/rows.js"
import { s3 } from "../../src/broadcast/exporters/s3.js"
import { snowflake } from "../../src/broadcast/exporters/snowflake.js"
import { ATTEMPT_SPAN, allSpans, BATCH, CONTENT, deliverToLoopback, json, normalJson, PRIVATE, type Received } from "./exporters-support.js"

const CREDS = { accessKeyId: "AKIAEXAMPLE", secretAccessKey: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" }

/** Recomputes the request's Signature V4 with aws4fetch from what arrived (its own date); true when it matches. */
const signatureVerifies = async (r: Received, secretAccessKey: string, region: string) => {
  const signed: Record<string, string> = {}
  for (const name of ["content-type", "x-amz-content-sha256", "x-amz-date", "x-amz-security-token"]) {
    const value = r.headers.get(name)
    if (value !== null) signed[name] = value
  }
  const recomputed = await new AwsV4Signer({
    method: r.method,
    url: r.intendedUrl,
    headers: signed,
    body: new Uint8Array(r.body),
    accessKeyId: CREDS.accessKeyId,
    secretAccessKey,
    sessionToken: r.headers.get("x-amz-security-token") ?? undefined,
    service: "s3",
    region,
    datetime: r.headers.get("x-amz-date") ?? "",
  }).sign()
  return recomputed.headers.get("authorization") === r.headers.get("authorization")
}

describe("s3", () => {
  const config = { ...CREDS, bucketName: "traces", region: "eu-central-1", endpoint: "https://minio.example.test:9000", prefix: "gw/prod" }

  test("one PUT per generation to {endpoint}/{bucket}/{prefix}/{date}/{traceId}-{timestamp}.json, path-style", async () => {
    const received = await deliverToLoopback(await s3.deliver(config, BATCH))
    expect(received.map((r) => r.method)).toEqual(["PUT", "PUT"])
    expect(received.map((r) => r.intendedUrl)).toEqual([
      `https://minio.example.test:9000/traces/gw/prod/2026-11-26/${CONTENT.traceId}-${CONTENT.startMs}.json`,
      `https://minio.example.test:9000/traces/gw/prod/2026-11-27/${PRIVATE.traceId}-${PRIVATE.startMs}.json`,
    ])
    for (const r of received) expect(r.headers.get("content-type")).toBe("application/json")
  })

  test("the Signature V4 is present and verifies (recomputed by aws4fetch); the payload hash is the body's", async () => {
    for (const r of await deliverToLoopback(await s3.deliver(config, BATCH))) {
      expect(r.headers.get("authorization")).toStartWith(`AWS4-HMAC-SHA256 Credential=${CREDS.accessKeyId}/`)
      expect(r.headers.get("authorization")).toContain("/eu-central-1/s3/aws4_request")
      expect(r.headers.get("x-amz-content-sha256")).toBe(createHash("sha256").update(r.body).digest("hex"))
      expect(await signatureVerifies(r, CREDS.secretAccessKey, "eu-central-1")).toBe(true)
      expect(await signatureVerifies(r, "another-secret", "eu-central-1")).toBe(false)
    }
  })

  test("each object is that generation's trace as OTLP JSON: its root and attempt spans only", async () => {
    const [a, b] = await deliverToLoopback(await s3.deliver(config, BATCH))
    const spansA = allSpans(normalJson(json(a as Received)))
    expect(spansA.map((s) => s.spanId).sort()).toEqual([ATTEMPT_SPAN[CONTENT.traceId], CONTENT.spanId].sort())
    expect(spansA.every((s) => s.traceId === CONTENT.traceId)).toBe(true)
    expect(spansA.find((s) => s.spanId === CONTENT.spanId)?.attributes["gen_ai.output.messages"]).toContain("Hello!")
    const spansB = allSpans(normalJson(json(b as Received)))
    expect(spansB.map((s) => s.spanId).sort()).toEqual([ATTEMPT_SPAN[PRIVATE.traceId], PRIVATE.spanId].sort())
    // Privacy mode: no prompt or completion in the private generation's object.
    expect(spansB.flatMap((s) => Object.keys(s.attributes)).filter((k) => k.includes("messages"))).toEqual([])
  })

  test("without endpoint: AWS virtual-hosted URL in the region; sessionToken is sent and signed", async () => {
    const received = await deliverToLoopback(
      await s3.deliver({ ...CREDS, bucketName: "traces", region: "eu-west-1", sessionToken: "session-token-1" }, BATCH),
    )
    const r = received[0] as Received
    expect(r.intendedUrl).toBe(`https://traces.s3.eu-west-1.amazonaws.com/2026-11-26/${CONTENT.traceId}-${CONTENT.startMs}.json`)
    expect(r.headers.get("x-amz-security-token")).toBe("session-token-1")
    expect(r.headers.get("authorization")).toContain("x-amz-security-token")
    expect(await signatureVerifies(r, CREDS.secretAccessKey, "eu-west-1")).toBe(true)
  })

  test("pathTemplate shapes the key; a repeated delivery writes the same keys", async () => {
    const templated = { ...config, pathTemplate: "{prefix}/{year}/{month}/{day}/{generationId}.json" }
    const first = (await deliverToLoopback(await s3.deliver(templated, BATCH))).map((r) => r.path)
    expect(first).toEqual(["/traces/gw/prod/2026/11/26/gen_content_1.json", "/traces/gw/prod/2026/11/27/gen_private_2.json"])
    expect((await deliverToLoopback(await s3.deliver(templated, BATCH))).map((r) => r.path)).toEqual(first)
  })
})

describe("clickhouse", () => {
  const config = { host: "https://ch.example.test:8443", database: "analytics", username: "writer", password: "ch-pass" }

  test("creates the table first, then inserts JSONEachRow rows; both with X-ClickHouse-User/Key", async () => {
    const [create, insert] = await deliverToLoopback(await clickhouse.deliver(config, BATCH))
    for (const r of [create, insert] as Array<Received>) {
      expect(r.method).toBe("POST")
      expect(r.path).toBe("/")
      expect(r.intendedUrl.startsWith("https://ch.example.test:8443/?")).toBe(true)
      expect(r.headers.get("x-clickhouse-user")).toBe("writer")
      expect(r.headers.get("x-clickhouse-key")).toBe("ch-pass")
    }
    const ddl = create?.query.get("query") ?? ""
    expect(ddl).toStartWith("CREATE TABLE IF NOT EXISTS `analytics`.`gateway_generations` (`generation_id` String, ")
    expect(ddl).toContain("`start_time` DateTime64(3, 'UTC')")
    expect(ddl).toEndWith("ENGINE = ReplacingMergeTree ORDER BY (`start_time`, `generation_id`)")
    expect(insert?.query.get("query")).toBe("INSERT INTO `analytics`.`gateway_generations` FORMAT JSONEachRow")
    expect(insert?.query.get("date_time_input_format")).toBe("best_effort")
  })

  test("one JSON row per generation with every column; values never in the SQL text", async () => {
    const [create, insert] = await deliverToLoopback(await clickhouse.deliver(config, BATCH))
    const rows = new TextDecoder()
      .decode((insert as Received).body)
      .split("\n")
      .map((line) => JSON.parse(line))
    expect(rows).toHaveLength(2)
    for (const row of rows) expect(Object.keys(row)).toEqual(COLUMNS.map(([name]) => name))
    expect(rows[0]).toMatchObject({
      generation_id: "gen_content_1",
      trace_id: CONTENT.traceId,
      start_time: CONTENT.createdAt,
      duration_ms: 1500,
      model: "openai/gpt-4o-mini",
      provider: "openai",
      total_tokens: 19,
      total_cost: 0.000021,
      session_id: "sess-42",
      user_id: "user-7",
      output: "Hello!",
    })
    expect(JSON.parse(rows[0].input)).toEqual(CONTENT.input)
    expect(JSON.parse(rows[0].metadata)).toEqual({ env: "test", team: "blue" })
    // Privacy mode: the private generation's content columns are null.
    expect(rows[1]).toMatchObject({ generation_id: "gen_private_2", input: null, output: null, reasoning: null, error_status: 502 })
    for (const r of [create, insert] as Array<Received>) {
      const sql = r.query.get("query") ?? ""
      for (const value of ["gen_content_1", "Hello!", "sess-42", "user-7", CONTENT.traceId]) expect(sql).not.toContain(value)
    }
  })

  test("identifiers are quoted and escaped; a bare host is https on port 8443", async () => {
    const [create, insert] = await deliverToLoopback(
      await clickhouse.deliver({ ...config, host: "abc.eu-west-1.aws.clickhouse.cloud", table: "odd`name" }, BATCH),
    )
    expect(create?.intendedUrl.startsWith("https://abc.eu-west-1.aws.clickhouse.cloud:8443/?")).toBe(true)
    expect(insert?.query.get("query")).toBe("INSERT INTO `analytics`.`odd\\`name` FORMAT JSONEachRow")
  })
})

describe("snowflake", () => {
  const config = { account: "xy12345.us-east-1", token: "pat-token", database: "AI", schema: "PUBLIC", warehouse: "COMPUTE_WH" }

  test("creates the table, then inserts: SQL API statements with the token as Bearer and its type", async () => {
    const [create, insert] = await deliverToLoopback(await snowflake.deliver(config, BATCH))
    for (const r of [create, insert] as Array<Received>) {
      expect(r.method).toBe("POST")
      expect(r.path).toBe("/api/v2/statements")
      expect(r.intendedUrl.startsWith("https://xy12345.us-east-1.snowflakecomputing.com/api/v2/statements")).toBe(true)
      expect(r.headers.get("authorization")).toBe("Bearer pat-token")
      expect(r.headers.get("x-snowflake-authorization-token-type")).toBe("PROGRAMMATIC_ACCESS_TOKEN")
      expect(r.headers.get("content-type")).toBe("application/json")
      expect(json(r)).toMatchObject({ database: "AI", schema: "PUBLIC", warehouse: "COMPUTE_WH" })
    }
    expect(json(create as Received).statement).toStartWith('CREATE TABLE IF NOT EXISTS "GATEWAY_GENERATIONS" ("GENERATION_ID" VARCHAR, ')
    expect(json(create as Received).statement).toContain('"METADATA" VARIANT')
  })

  test("every value is a bind variable, numbered across rows in column order; none in the SQL text", async () => {
    const [, insert] = await deliverToLoopback(await snowflake.deliver(config, BATCH))
    const body = json(insert as Received)
    expect(Object.keys(body.bindings)).toHaveLength(2 * COLUMNS.length)
    expect(body.statement).toStartWith('INSERT INTO "GATEWAY_GENERATIONS" ("GENERATION_ID", "TRACE_ID", ')
    expect(body.statement.match(/SELECT /g)).toHaveLength(2)
    expect(body.statement).toContain("PARSE_JSON(?)")
    expect(body.bindings["1"]).toEqual({ type: "TEXT", value: "gen_content_1" })
    const column = (row: number, name: string) =>
      body.bindings[String(row * COLUMNS.length + COLUMNS.findIndex(([n]) => n === name) + 1)]
    expect(column(0, "input_tokens")).toEqual({ type: "FIXED", value: "12" })
    expect(column(0, "streamed")).toEqual({ type: "BOOLEAN", value: "true" })
    expect(column(0, "output")).toEqual({ type: "TEXT", value: "Hello!" })
    expect(column(1, "generation_id")).toEqual({ type: "TEXT", value: "gen_private_2" })
    // Privacy mode: null content.
    expect(column(1, "input")).toEqual({ type: "TEXT", value: null })
    expect(column(1, "output")).toEqual({ type: "TEXT", value: null })
    for (const value of ["gen_content_1", "Hello!", "sess-42"]) expect(body.statement).not.toContain(value)
  })

  test("the insert's requestId is stable for the batch (retry=true), so a resubmission does not run twice", async () => {
    const first = (await deliverToLoopback(await snowflake.deliver(config, BATCH)))[1] as Received
    const again = (await deliverToLoopback(await snowflake.deliver(config, BATCH)))[1] as Received
    expect(first.query.get("retry")).toBe("true")
    expect(first.query.get("requestId")).toMatch(/^[0-9a-f-]{36}$/)
    expect(again.query.get("requestId")).toBe(first.query.get("requestId"))
  })

  test("tokenType and table are configurable; unset context keys are left to the user's defaults", async () => {
    const [create] = await deliverToLoopback(
      await snowflake.deliver({ account: "myorg-acct", token: "jwt", tokenType: "KEYPAIR_JWT", table: "llm_traces" }, BATCH),
    )
    expect(create?.headers.get("x-snowflake-authorization-token-type")).toBe("KEYPAIR_JWT")
    const body = json(create as Received)
    expect(body.statement).toStartWith('CREATE TABLE IF NOT EXISTS "llm_traces" (')
    expect(body.database).toBeUndefined()
    expect(body.warehouse).toBeUndefined()
  })
})
