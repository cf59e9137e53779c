/** Failures on the request path go to the log as one JSON line with the request's id, not to stderr. */
import { describe, expect, test } from "bun:test"
import { LineWriter, makeErrorLog } from "../../src/lib/log.js"

const capture = () => {
  const lines: Array<Record<string, unknown>> = []
  const writer = new LineWriter((text) => {
    for (const line of text.split("\n")) if (line !== "") lines.push(JSON.parse(line) as Record<string, unknown>)
  })
  return { lines, writer }
}

describe("the request path's error log", () => {
  test("a failure is an error line with the request and generation ids and the error", () => {
    const { lines, writer } = capture()
    makeErrorLog("info", writer)({ requestId: "req-1", generationId: "gen-1" }, "settling a request failed", new Error("boom"))
    writer.flush()
    expect(lines).toHaveLength(1)
    expect(lines[0]).toMatchObject({ level: "error", msg: "settling a request failed", request_id: "req-1", generation_id: "gen-1" })
    expect(String(lines[0]?.["error"])).toContain("boom")
  })

  test("nothing is written at level none", () => {
    const { lines, writer } = capture()
    makeErrorLog("none", writer)({ requestId: "req-1" }, "x")
    writer.flush()
    expect(lines).toEqual([])
  })
})
