import { describe, expect, test } from "bun:test"
import { LineWriter } from "../../src/lib/log.js"

describe("LineWriter", () => {
  test("lines wait for the flush interval, then go out together in one write", async () => {
    // Only lower bounds on time: a loaded machine may fire the timer late, never early.
    const writes: Array<{ text: string; at: number }> = []
    const writer = new LineWriter((text) => writes.push({ text, at: performance.now() }), 30, 1_000)
    const first = performance.now()
    writer.write('{"a":1}')
    writer.write('{"b":2}')
    await Promise.resolve()
    expect(writes).toEqual([])
    await waitFor(() => writes.length === 1)
    expect(writes[0]!.text).toBe('{"a":1}\n{"b":2}\n')
    expect(writes[0]!.at - first).toBeGreaterThanOrEqual(25)
    // The next line starts a new interval.
    const second = performance.now()
    writer.write('{"c":3}')
    await waitFor(() => writes.length === 2)
    expect(writes[1]!.text).toBe('{"c":3}\n')
    expect(writes[1]!.at - second).toBeGreaterThanOrEqual(25)
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

async function waitFor(done: () => boolean): Promise<void> {
  const deadline = performance.now() + 5_000
  while (!done()) {
    if (performance.now() > deadline) throw new Error("timed out waiting for the write")
    await Bun.sleep(2)
  }
}
