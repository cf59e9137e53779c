import { describe, expect, test } from "bun:test"
import { LineWriter } from "../../src/lib/log.js"

describe("LineWriter", () => {
  test("lines wait for the flush interval, then go out together in one write", async () => {
    const writes: Array<string> = []
    const writer = new LineWriter((text) => writes.push(text), 30, 1_000)
    writer.write('{"a":1}')
    writer.write('{"b":2}')
    await Promise.resolve()
    await Bun.sleep(5)
    expect(writes).toEqual([])
    await Bun.sleep(60)
    expect(writes).toEqual(['{"a":1}\n{"b":2}\n'])
    // The next line starts a new interval.
    writer.write('{"c":3}')
    await Bun.sleep(60)
    expect(writes).toEqual(['{"a":1}\n{"b":2}\n', '{"c":3}\n'])
  })

  test("a full buffer is written at once, and flush writes what waits and cancels the timer", async () => {
    const writes: Array<string> = []
    const writer = new LineWriter((text) => writes.push(text), 10_000, 20)
    writer.write("0123456789")
    expect(writes).toEqual([])
    writer.write("abcdefghij")
    expect(writes).toEqual(["0123456789\nabcdefghij\n"])
    writer.write("tail")
    writer.flush()
    expect(writes).toEqual(["0123456789\nabcdefghij\n", "tail\n"])
    // Nothing waits: a second flush writes nothing.
    writer.flush()
    expect(writes.length).toBe(2)
  })
})
