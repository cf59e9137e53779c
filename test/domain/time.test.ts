import { describe, expect, test } from "bun:test"
import { isoTime } from "../../src/domain/time"

describe("isoTime", () => {
  test("the same text as toISOString, across seconds, in any order, every millisecond pad", () => {
    const base = Date.UTC(2026, 10, 23, 4, 59, 59, 0)
    const times = [base, base + 1, base + 9, base + 10, base + 99, base + 100, base + 999, base + 1000, base + 1001, base - 1, base + 60_000, base]
    let seed = 11
    for (let i = 0; i < 2_000; i++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      times.push(base + (seed % 5_000) - 2_500)
    }
    for (const ms of times) expect(isoTime(ms)).toBe(new Date(ms).toISOString())
  })

  test("times outside the cached form are formatted by Date", () => {
    for (const ms of [0, 999, 1000.5, -1, -86_400_001, 253_402_300_799_999, Date.UTC(2000, 1, 29, 23, 59, 59, 999)]) {
      expect(isoTime(ms)).toBe(new Date(ms).toISOString())
    }
    expect(() => isoTime(Number.NaN)).toThrow(RangeError)
  })
})
