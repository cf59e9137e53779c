/**
 * The file-parser plugin end to end: a PDF made here with pdf-lib, sent in each client
 * format, reaches the mock upstream as text under pdf-text; native leaves the file to an endpoint
 * that takes files and refuses one that cannot; the cache and the annotation sent back; the
 * limits (pages, unreadable, file_url refused by the outbound policy); `enabled: false`.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, test } from "bun:test"
import { PDFDocument, StandardFonts } from "pdf-lib"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { clearFileParserCache } from "../../src/pipeline/plugins/file-parser.js"
import { parsePdfInWorker } from "../../src/lib/pdf.js"
import { expectError } from "../support/gateway.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway } from "../routing/helpers.js"

const SECRET = "The quarterly revenue was 42 zorkmids."

const pdfOf = async (pages: ReadonlyArray<string>): Promise<Uint8Array> => {
  const doc = await PDFDocument.create()
  const font = await doc.embedFont(StandardFonts.Helvetica)
  for (const text of pages) doc.addPage().drawText(text, { x: 50, y: 700, font, size: 12 })
  return doc.save()
}

const dataUrl = (bytes: Uint8Array) => `data:application/pdf;base64,${Buffer.from(bytes).toString("base64")}`
const sha256 = (bytes: Uint8Array) => new Bun.CryptoHasher("sha256").update(bytes).digest("hex")

let mock: MockUpstream
let gw: Gateway
let pdf: Uint8Array
let files: ReturnType<typeof Bun.serve>

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  pdf = await pdfOf([SECRET])
  // A file server on loopback: refused by the outbound policy unless allowed.
  files = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response(Buffer.from(pdf), { headers: { "content-type": "application/pdf" } }) })
  gw = await startGateway({
    ...catalogOf(
      [mockProvider(mock, "chatp"), mockProvider(mock, "anth", {}, { kind: "anthropic" }), mockProvider(mock, "resp", {}, { kind: "openai-responses" })],
      [
        model("t/text", endpoint("chatp", 1, 1)),
        model("t/files-anthropic", endpoint("anth", 1, 1, { supports: ["files"] })),
        model("t/files-chat", endpoint("chatp", 1, 1, { supports: ["files"] })),
      ],
    ),
    plugins: { file_parser: { max_pages: 3 } },
  })
})

afterAll(async () => {
  files?.stop(true)
  await gw?.stop()
  await mock?.stop()
})

beforeEach(() => {
  mock.requests.length = 0
  clearFileParserCache()
})

/** Everything the upstream received, as text. */
const upstreamText = () => JSON.stringify(mock.requests.map((r) => r.body))

const responsesBody = (file: Record<string, unknown>, plugin: Record<string, unknown> = { id: "file-parser" }, modelId = "t/text") => ({
  model: modelId,
  input: [{ type: "message", role: "user", content: [{ type: "input_text", text: "Summarise" }, { type: "input_file", filename: "report.pdf", ...file }] }],
  plugins: [plugin],
})

const post = (path: string, json: unknown, headers: Record<string, string> = {}) =>
  gw.fetch(path, { method: "POST", json, headers: { "x-service-metadata": "enabled", ...headers } })

interface Entry {
  readonly type: string
  readonly name: string
  readonly summary: string
  readonly data: { readonly engine: string; readonly files: ReadonlyArray<{ name: string; hash: string; pages: number; source: string }> }
}

const entryOf = (body: unknown): Entry | undefined =>
  ((body as { service_metadata?: { pipeline?: ReadonlyArray<Entry> } }).service_metadata?.pipeline ?? []).find((e) => e.name === "file-parser")

describe("pdf-text: the PDF's text reaches the upstream", () => {
  test("Responses input_file file_data, with a pipeline entry naming the engine and the hash", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }))
    const body = await res.json()
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
    expect(upstreamText()).toContain("[File: report.pdf]")
    // The file itself did not go: the text replaced it.
    expect(upstreamText()).not.toContain("application/pdf;base64")
    const entry = entryOf(body)
    expect(entry?.type).toBe("plugin")
    expect(entry?.data.engine).toBe("pdf-text")
    // The annotation to send back carries the hash and the text.
    expect((entry?.data as unknown as { annotations: unknown } | undefined)?.annotations).toEqual([
      { type: "file", file: { hash: sha256(pdf), name: "report.pdf", content: [{ type: "text", text: SECRET }] } },
    ])
    expect(entry?.data.files).toEqual([{ name: "report.pdf", hash: sha256(pdf), pages: 1, source: "parsed", characters: expect.any(Number) } as never])
  })

  test("Chat Completions {type: file}", async () => {
    const res = await post("/v1/chat/completions", {
      model: "t/text",
      messages: [{ role: "user", content: [{ type: "text", text: "Summarise" }, { type: "file", file: { filename: "report.pdf", file_data: dataUrl(pdf) } }] }],
      plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }],
    })
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
  })

  test("Messages document block", async () => {
    const res = await post(
      "/v1/messages",
      {
        model: "t/text",
        max_tokens: 50,
        messages: [
          {
            role: "user",
            content: [
              { type: "document", source: { type: "base64", media_type: "application/pdf", data: Buffer.from(pdf).toString("base64") }, title: "report.pdf" },
              { type: "text", text: "Summarise" },
            ],
          },
        ],
        plugins: [{ id: "file-parser" }],
      },
      { "anthropic-version": "2023-06-01" },
    )
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
  })

  test("cloudflare-ai is served as pdf-text", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", pdf: { engine: "cloudflare-ai" } }))
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
    expect(entryOf(await res.json())?.summary).toContain("served as pdf-text")
  })

  test("a second request with the same file is served from the cache", async () => {
    await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }))
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }))
    expect(entryOf(await res.json())?.data.files[0]?.source).toBe("cache")
    expect(upstreamText()).toContain(SECRET)
  })
})

describe("the annotation a client sends back", () => {
  const withAnnotation = (hash: string) => ({
    model: "t/text",
    input: [
      { type: "message", role: "user", content: [{ type: "input_file", filename: "report.pdf", file_data: dataUrl(pdf) }] },
      {
        type: "message",
        role: "assistant",
        content: [
          {
            type: "output_text",
            text: "Noted.",
            annotations: [{ type: "file", file: { hash, name: "report.pdf", content: [{ type: "text", text: "TEXT FROM THE ANNOTATION" }] } }],
          },
        ],
      },
      { type: "message", role: "user", content: "And?" },
    ],
    plugins: [{ id: "file-parser" }],
  })

  test("used when its hash is the file's sha256", async () => {
    const res = await post("/v1/responses", withAnnotation(sha256(pdf)))
    expect(res.status).toBe(200)
    expect(entryOf(await res.json())?.data.files[0]?.source).toBe("annotation")
    expect(upstreamText()).toContain("TEXT FROM THE ANNOTATION")
    expect(upstreamText()).not.toContain(SECRET)
  })

  test("ignored when the hash does not match the bytes: the file is parsed", async () => {
    const res = await post("/v1/responses", withAnnotation("0".repeat(64)))
    expect(res.status).toBe(200)
    expect(entryOf(await res.json())?.data.files[0]?.source).toBe("parsed")
    const lastUser = JSON.stringify(mock.requests[0]?.body)
    expect(lastUser).toContain(SECRET)
  })
})

describe("the file annotation on the answer, sent back with the next turn (each format)", () => {
  const annotation = () => ({ type: "file", file: { hash: sha256(pdf), name: "report.pdf", content: [{ type: "text", text: SECRET }] } })
  const b64 = () => Buffer.from(pdf).toString("base64")
  const chatFile = () => ({ role: "user", content: [{ type: "text", text: "Summarise" }, { type: "file", file: { filename: "report.pdf", file_data: dataUrl(pdf) } }] })
  const messagesFile = () => ({
    role: "user",
    content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: b64() }, title: "report.pdf" }, { type: "text", text: "Summarise" }],
  })
  const ANTHROPIC = { "anthropic-version": "2023-06-01" }
  /** The second turn's parse: from the annotation sent back, not a parse nor the cache (cleared between). */
  const secondTurnSource = async (path: string, json: unknown, headers: Record<string, string> = {}) => {
    clearFileParserCache()
    mock.requests.length = 0
    const res = await post(path, json, headers)
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
    return entryOf(await res.json())?.data.files[0]?.source
  }

  test("Responses: on the message's output_text; the output sent back as input spares the parse", async () => {
    const first = (await (await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }))).json()) as { output: Array<{ content: Array<{ annotations: unknown }> }> }
    expect(first.output[0]?.content[0]?.annotations).toEqual([annotation()])
    const next = { ...responsesBody({ file_data: dataUrl(pdf) }), input: [...responsesBody({ file_data: dataUrl(pdf) }).input, ...first.output, { type: "message", role: "user", content: "And?" }] }
    expect(await secondTurnSource("/v1/responses", next)).toBe("annotation")
  })

  test("Chat Completions: on choices[0].message.annotations; the message sent back spares the parse", async () => {
    const body = { model: "t/text", messages: [chatFile()], plugins: [{ id: "file-parser" }] }
    const first = (await (await post("/v1/chat/completions", body)).json()) as { choices: Array<{ message: { annotations?: unknown } }> }
    const message = first.choices[0]?.message
    expect(message?.annotations).toEqual([annotation()])
    expect(await secondTurnSource("/v1/chat/completions", { ...body, messages: [chatFile(), message, { role: "user", content: "And?" }] })).toBe("annotation")
  })

  test("Messages: on the first text block; the content sent back spares the parse", async () => {
    const body = { model: "t/text", max_tokens: 50, messages: [messagesFile()], plugins: [{ id: "file-parser" }] }
    const first = (await (await post("/v1/messages", body, ANTHROPIC)).json()) as { content: Array<{ type: string; annotations?: unknown }> }
    expect(first.content[0]).toMatchObject({ type: "text", annotations: [annotation()] })
    const next = { ...body, messages: [messagesFile(), { role: "assistant", content: first.content }, { role: "user", content: "And?" }] }
    expect(await secondTurnSource("/v1/messages", next, ANTHROPIC)).toBe("annotation")
  })

  test("streamed: Responses annotation.added and the done part, the Chat finish chunk's delta, the Messages text block's start", async () => {
    const streamed = async (path: string, json: Record<string, unknown>, headers: Record<string, string> = {}) => {
      const res = await post(path, { ...json, stream: true }, headers)
      expect(res.status).toBe(200)
      return (await res.text())
        .split("\n")
        .filter((line) => line.startsWith("data: {"))
        .map((line) => JSON.parse(line.slice(6)) as Record<string, unknown>)
    }
    const responses = await streamed("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }))
    expect(responses.find((e) => e["type"] === "response.output_text.annotation.added")).toMatchObject({ annotation_index: 0, annotation: annotation() })
    const done = responses.find((e) => e["type"] === "response.content_part.done") as { part: { annotations: unknown } }
    expect(done.part.annotations).toEqual([annotation()])
    const completed = responses.find((e) => e["type"] === "response.completed") as { response: { output: Array<{ content: Array<{ annotations: unknown }> }> } }
    expect(completed.response.output[0]?.content[0]?.annotations).toEqual([annotation()])

    const chat = await streamed("/v1/chat/completions", { model: "t/text", messages: [chatFile()], plugins: [{ id: "file-parser" }] })
    const deltas = chat.map((c) => (c["choices"] as Array<{ delta?: { annotations?: unknown } }> | undefined)?.[0]?.delta?.annotations).filter((a) => a !== undefined)
    expect(deltas).toEqual([[annotation()]])

    const messages = await streamed("/v1/messages", { model: "t/text", max_tokens: 50, messages: [messagesFile()], plugins: [{ id: "file-parser" }] }, ANTHROPIC)
    const start = messages.find((e) => e["type"] === "content_block_start") as { content_block: unknown }
    expect(start.content_block).toEqual({ type: "text", text: "", annotations: [annotation()] })
  })

  test("an answer without the plugin carries no annotation", async () => {
    const plain = (await (await post("/v1/chat/completions", { model: "t/text", messages: [{ role: "user", content: "hi" }] })).json()) as {
      choices: Array<{ message: Record<string, unknown> }>
    }
    expect("annotations" in (plain.choices[0]?.message ?? {})).toBe(false)
  })
})

describe("native", () => {
  test("default on an endpoint that takes files: the file goes to the upstream as a document, no entry", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser" }, "t/files-anthropic"))
    const body = await res.json()
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain('"type":"document"')
    expect(upstreamText()).not.toContain(SECRET)
    expect(entryOf(body)).toBeUndefined()
  })

  test("asked on an endpoint without files: 400 naming the part", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", pdf: { engine: "native" } }))
    const message = await expectError(res, 400)
    expect(message).toContain("input[0].content[1]")
    expect(message).toContain("native")
    expect(mock.requests.length).toBe(0)
  })

  test("a file_url to a Chat Completions upstream (its wire has no URL form): 400 naming the part", async () => {
    const res = await post("/v1/responses", responsesBody({ file_url: "https://example.com/r.pdf" }, { id: "file-parser", pdf: { engine: "native" } }, "t/files-chat"))
    expect(await expectError(res, 400)).toContain("input[0].content[1].file_url")
  })
})

describe("refusals", () => {
  test("an unknown engine: 400 naming plugins[0].pdf.engine", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", pdf: { engine: "magic" } }))
    expect(await expectError(res, 400)).toContain("plugins[0].pdf.engine")
  })

  test("more pages than max_pages: 400 naming the item, nothing sent upstream", async () => {
    const long = await pdfOf(["1", "2", "3", "4"])
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(long) }))
    const message = await expectError(res, 400)
    expect(message).toContain("input[0].content[1]")
    expect(message).toContain("4 pages")
    expect(mock.requests.length).toBe(0)
  })

  test("an unreadable PDF: 400 naming the item", async () => {
    const broken = new TextEncoder().encode("%PDF-1.7\nthis is not really a pdf")
    const message = await expectError(await post("/v1/responses", responsesBody({ file_data: dataUrl(broken) })), 400)
    expect(message).toContain("input[0].content[1]")
    expect(message).toContain("could not be read")
  })

  test("a file that is not a PDF: 400", async () => {
    const message = await expectError(await post("/v1/responses", responsesBody({ file_data: `data:text/plain;base64,${btoa("hello")}` })), 400)
    expect(message).toContain("not a PDF")
  })

  test("a file_url on loopback is refused by the outbound policy (no fetch made)", async () => {
    const res = await post("/v1/responses", responsesBody({ file_url: `http://127.0.0.1:${files.port}/r.pdf` }))
    const message = await expectError(res, 400)
    expect(message).toContain("input[0].content[1].file_url")
    expect(message).toContain("outbound.allow_private_addresses")
  })

  test("a file_url to the metadata address is refused", async () => {
    const message = await expectError(await post("/v1/responses", responsesBody({ file_url: "http://169.254.169.254/latest/meta-data/" })), 400)
    expect(message).toContain("private or reserved")
  })

  test("enabled: false: the file part goes through untouched", async () => {
    const res = await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", enabled: false }))
    expect(res.status).toBe(200)
    expect(upstreamText()).not.toContain(SECRET)
    expect(entryOf(await res.json())).toBeUndefined()
  })
})

describe("file_url with private addresses allowed", () => {
  let open: Gateway
  beforeAll(async () => {
    open = await startGateway({
      ...catalogOf([mockProvider(mock, "chatp")], [model("t/text", endpoint("chatp", 1, 1))]),
      outbound: { allow_private_addresses: true },
    })
  })
  afterAll(async () => {
    await open?.stop()
  })

  test("the file is fetched through the outbound fetcher and its text reaches the upstream", async () => {
    const res = await open.fetch("/v1/responses", { method: "POST", json: responsesBody({ file_url: `http://127.0.0.1:${files.port}/r.pdf` }) })
    expect(res.status).toBe(200)
    expect(upstreamText()).toContain(SECRET)
  })
})

describe("mistral-ocr", () => {
  let ocrGw: Gateway
  beforeAll(async () => {
    ocrGw = await startGateway({
      ...catalogOf(
        [mockProvider(mock, "chatp"), mockProvider(mock, "ocrp", { "x-mock-ocr-pages": "2" })],
        [model("t/text", endpoint("chatp", 0, 0))],
      ),
      plugins: { file_parser: { ocr: { provider: "ocrp", model: "mistral-ocr-latest", price_per_page: 0.001 } } },
    })
  })
  afterAll(async () => {
    await ocrGw?.stop()
  })

  test("the file goes to the provider's /ocr in Mistral's shape; its pages reach the upstream; the pages are charged", async () => {
    const res = await ocrGw.fetch("/v1/responses", {
      method: "POST",
      json: responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", pdf: { engine: "mistral-ocr" } }),
      headers: { "x-service-metadata": "enabled" },
    })
    const body = await res.json()
    expect(res.status).toBe(200)
    const call = mock.requests.find((r) => r.path === "/v1/ocr")
    expect(call?.body).toEqual({ model: "mistral-ocr-latest", document: { type: "document_url", document_url: dataUrl(pdf) }, include_image_base64: false })
    expect(upstreamText()).toContain("mock OCR page 2 of a")
    const entry = entryOf(body) as unknown as { data: { engine: string; cost: number } }
    expect(entry.data.engine).toBe("mistral-ocr")
    expect(entry.data.cost).toBeCloseTo(0.002, 12)
    // The answer shows what the key is charged: the OCR's pages too.
    expect((body as { usage: { cost: number } }).usage.cost).toBeCloseTo(0.002, 12)
    await ocrGw.server.drain()
    const id = res.headers.get("x-generation-id")
    const g = ((await (await ocrGw.fetch(`/v1/generation?id=${id}`)).json()) as { data: { total_cost: number } }).data
    // The model is free here: the record's cost is the OCR's two pages.
    expect(g.total_cost).toBeCloseTo(0.002, 12)
  })

  test("an OCR provider that fails: 502 naming the item, no upstream call", async () => {
    const failing = await startGateway({
      ...catalogOf([mockProvider(mock, "chatp"), mockProvider(mock, "ocrp", { "x-mock-error": "500" })], [model("t/text", endpoint("chatp", 0, 0))]),
      plugins: { file_parser: { ocr: { provider: "ocrp", model: "mistral-ocr-latest" } } },
    })
    try {
      const res = await failing.fetch("/v1/responses", {
        method: "POST",
        json: responsesBody({ file_data: dataUrl(await pdfOf(["other"])) }, { id: "file-parser", pdf: { engine: "mistral-ocr" } }),
      })
      expect(await expectError(res, 502)).toContain("input[0].content[1]")
      expect(mock.requests.map((r) => r.path)).toEqual(["/v1/ocr"])
    } finally {
      await failing.stop()
    }
  })

  test("not configured: 400 saying so", async () => {
    const message = await expectError(await post("/v1/responses", responsesBody({ file_data: dataUrl(pdf) }, { id: "file-parser", pdf: { engine: "mistral-ocr" } })), 400)
    expect(message).toContain("mistral-ocr is not configured")
  })
})

describe("the PDF worker", () => {
  test("parses queue behind the worker cap and all complete", async () => {
    const results = await Promise.all([1, 2, 3, 4].map(async (n) => parsePdfInWorker(await pdfOf([`page of ${n}`]), 5, 20_000)))
    expect(results.map((r) => (r.ok ? r.text.join("") : r.reason))).toEqual(["page of 1", "page of 2", "page of 3", "page of 4"])
  })

  test("a parse over its time limit ends as unreadable (the worker is terminated)", async () => {
    const result = await parsePdfInWorker(pdf, 5, 1)
    expect(result).toEqual({ ok: false, reason: "unreadable", detail: "not parsed within 1 ms" })
  })
})
