/** The byte buffer streamed text deltas are written into, and its decimal writer. */
import { expect, test } from "bun:test"
import { ByteWriter, MAX_INTEGER_DIGITS, writeInteger } from "../../src/formats/responses/byte-writer.js"

const decode = (bytes: Uint8Array) => new TextDecoder().decode(bytes)

test("writeInteger writes what String does, at any offset, within MAX_INTEGER_DIGITS", () => {
  const buf = new Uint8Array(32)
  for (const n of [0, 1, 9, 10, 11, 99, 100, 101, 999, 1000, 65535, 123456789, 2 ** 31 - 1]) {
    for (const at of [0, 3]) {
      buf.fill(0)
      const end = writeInteger(buf, at, n)
      expect(decode(buf.subarray(at, end))).toBe(String(n))
      expect(end - at).toBeLessThanOrEqual(MAX_INTEGER_DIGITS)
      // Nothing written outside its digits.
      expect(buf.subarray(0, at).every((b) => b === 0)).toBe(true)
      expect(buf.subarray(end).every((b) => b === 0)).toBe(true)
    }
  }
})

test("the writer grows past its first buffer and keeps what was written, text as UTF-8", () => {
  const writer = new ByteWriter(8)
  const parts = ["event: x\n", "é ☃ 😀", "", "a".repeat(100)]
  for (const part of parts) writer.text(part)
  const room = writer.reserve(3)
  room.set([65, 66, 67], writer.length)
  writer.length += 3
  expect(decode(writer.take())).toBe(`${parts.join("")}ABC`)
  // Emptied by take: the next text starts at the beginning.
  writer.text("next")
  expect(decode(writer.take())).toBe("next")
})
