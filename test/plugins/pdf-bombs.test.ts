/**
 * PDF bombs: a small file whose compressed streams inflate past
 * `plugins.file_parser.max_stream_inflated_bytes` (one stream) or `max_inflated_bytes` (all of
 * them) is refused with a 400 naming the bound, before the parser holds the inflated bytes; a
 * parse whose memory grows past `max_parse_memory_bytes` is ended (400 naming it) and the next
 * parse runs in a fresh worker. The bombs are made here (pdf-lib, node:zlib) with the bounds
 * lowered, so the test stays within tens of megabytes.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { createDeflate, deflateSync } from "node:zlib"
import { PDFArray, PDFDocument, PDFName, StandardFonts } from "pdf-lib"
import { type MockUpstream, startMockUpstream } from "../../scripts/mock-upstream.js"
import { clearFileParserCache } from "../../src/pipeline/plugins/file-parser.js"
import { catalogOf, endpoint, type Gateway, mockProvider, model, startGateway } from "../routing/helpers.js"

const MB = 1024 * 1024

/** `size` bytes of spaces (whitespace to the parser) as one zlib stream, deflated a megabyte at a time. */
const deflatedSpaces = (size: number): Promise<Uint8Array> =>
  new Promise((resolve, reject) => {
    const deflate = createDeflate({ level: 9 })
    const out: Array<Buffer> = []
    deflate.on("data", (chunk: Buffer) => out.push(chunk))
    deflate.on("end", () => resolve(new Uint8Array(Buffer.concat(out))))
    deflate.on("error", reject)
    const chunk = Buffer.alloc(MB, 0x20)
    let left = size
    const write = () => {
      while (left > 0) {
        const n = Math.min(left, MB)
        left -= n
        if (!deflate.write(n === MB ? chunk : chunk.subarray(0, n))) return void deflate.once("drain", write)
      }
      deflate.end()
    }
    write()
  })

/** A PDF with one page per entry of `streams`, each page's content that compressed stream (filters as given). */
const bombOf = async (streams: ReadonlyArray<{ readonly data: Uint8Array; readonly filters: number }>): Promise<Uint8Array> => {
  const doc = await PDFDocument.create()
  const font = await doc.embedFont(StandardFonts.Helvetica)
  for (const { data, filters } of streams) {
    const page = doc.addPage()
    page.drawText("inflate me", { x: 50, y: 700, font, size: 12 })
    const filter = filters === 1 ? PDFName.of("FlateDecode") : PDFArray.withContext(doc.context)
    if (filter instanceof PDFArray) for (let i = 0; i < filters; i++) filter.push(PDFName.of("FlateDecode"))
    const ref = doc.context.register(doc.context.stream(data, { Filter: filter, Length: data.length }))
    page.node.addContentStream(ref)
  }
  return doc.save({ useObjectStreams: false })
}

const plainPdf = async (text: string): Promise<Uint8Array> => {
  const doc = await PDFDocument.create()
  const font = await doc.embedFont(StandardFonts.Helvetica)
  doc.addPage().drawText(text, { x: 50, y: 700, font, size: 12 })
  return doc.save()
}

const dataUrl = (bytes: Uint8Array) => `data:application/pdf;base64,${Buffer.from(bytes).toString("base64")}`

let mock: MockUpstream
let bounded: Gateway
let memoryBound: Gateway

beforeAll(async () => {
  mock = await startMockUpstream({ tokens: 3 })
  const catalog = catalogOf([mockProvider(mock, "chatp")], [model("t/text", endpoint("chatp", 1, 1))])
  bounded = await startGateway({ ...catalog, plugins: { file_parser: { max_inflated_bytes: 8 * MB, max_stream_inflated_bytes: 4 * MB } } })
  // The inflation check let through (its bounds far above the bomb): only the memory bound is left.
  memoryBound = await startGateway({
    ...catalog,
    plugins: { file_parser: { max_inflated_bytes: 1024 * MB, max_stream_inflated_bytes: 1024 * MB, max_parse_memory_bytes: 64 * MB } },
  })
})

afterAll(async () => {
  await bounded?.stop()
  await memoryBound?.stop()
  await mock?.stop()
})

const send = async (gw: Gateway, pdf: Uint8Array) => {
  clearFileParserCache()
  const from = mock.requests.length
  const res = await gw.fetch("/v1/responses", {
    method: "POST",
    json: {
      model: "t/text",
      input: [{ type: "message", role: "user", content: [{ type: "input_file", filename: "bomb.pdf", file_data: dataUrl(pdf) }] }],
      plugins: [{ id: "file-parser", pdf: { engine: "pdf-text" } }],
    },
  })
  const body = (await res.json()) as { error?: { message: string } }
  return { status: res.status, message: body.error?.message ?? "", upstreamCalls: mock.requests.length - from }
}

describe("a PDF whose streams inflate past the bounds is refused before it is parsed", () => {
  test("one stream inflating to 16 MB (bound 4 MB per stream): 400 naming max_stream_inflated_bytes, no upstream call", async () => {
    const pdf = await bombOf([{ data: await deflatedSpaces(16 * MB), filters: 1 }])
    expect(pdf.length).toBeLessThan(100 * 1024)
    const { status, message, upstreamCalls } = await send(bounded, pdf)
    expect(status).toBe(400)
    expect(message).toContain("input[0].content[0]: a compressed stream of the PDF bomb.pdf inflates to more than 4194304 bytes")
    expect(message).toContain("plugins.file_parser.max_stream_inflated_bytes")
    expect(upstreamCalls).toBe(0)
  }, 60_000)

  test("three streams of 3 MB each (9 MB, bound 8 MB in all): 400 naming max_inflated_bytes", async () => {
    const stream = await deflatedSpaces(3 * MB)
    const pdf = await bombOf([1, 2, 3].map(() => ({ data: stream, filters: 1 })))
    const { status, message } = await send(bounded, pdf)
    expect(status).toBe(400)
    expect(message).toContain("inflate to more than 8388608 bytes in all (plugins.file_parser.max_inflated_bytes)")
  }, 60_000)

  test("a stream deflated twice (a FlateDecode chain) is counted at its final size", async () => {
    const inner = await deflatedSpaces(16 * MB)
    const pdf = await bombOf([{ data: new Uint8Array(deflateSync(inner)), filters: 2 }])
    const { status, message } = await send(bounded, pdf)
    expect(status).toBe(400)
    expect(message).toContain("plugins.file_parser.max_stream_inflated_bytes")
  }, 60_000)

  test("streams under the bounds parse as before", async () => {
    const pdf = await bombOf([{ data: await deflatedSpaces(2 * MB), filters: 1 }])
    const { status } = await send(bounded, pdf)
    expect(status).toBe(200)
    const sent = JSON.stringify(mock.requests.at(-1)?.body)
    expect(sent).toContain("inflate me")
  }, 60_000)
})

describe("a parse is ended past its memory bound", () => {
  test("a bomb let through by the inflation check is stopped at max_parse_memory_bytes (400); the next parse runs in a fresh worker", async () => {
    const pdf = await bombOf([{ data: await deflatedSpaces(256 * MB), filters: 1 }])
    const { status, message, upstreamCalls } = await send(memoryBound, pdf)
    expect(status).toBe(400)
    expect(message).toContain(`took more than ${64 * MB} bytes of memory (plugins.file_parser.max_parse_memory_bytes)`)
    expect(upstreamCalls).toBe(0)
    const next = await send(memoryBound, await plainPdf("after the bomb"))
    expect(next.status).toBe(200)
    expect(JSON.stringify(mock.requests.at(-1)?.body)).toContain("after the bomb")
  }, 120_000)
})
