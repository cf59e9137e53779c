/** Ids drawn from the pooled random buffer stay well-formed and distinct across many refills of the pool. */
import { expect, test } from "bun:test"
import { newGenerationId } from "../../src/domain/generations"
import { randomHex, randomPool, takeRandom } from "../../src/domain/random"
import { newId } from "../../src/formats/responses/assembler"

test("10,000 generation ids and response ids are well-formed and all distinct", () => {
  const generations = new Set<string>()
  const responses = new Set<string>()
  for (let i = 0; i < 10_000; i++) {
    generations.add(newGenerationId(1_700_000_000_000))
    responses.add(newId("resp"))
  }
  expect(generations.size).toBe(10_000)
  expect(responses.size).toBe(10_000)
  for (const id of generations) expect(id).toMatch(/^gen-1700000000-[A-Za-z0-9]{20}$/)
  for (const id of responses) expect(id).toMatch(/^resp_[0-9a-f]{24}$/)
})

test("a reservation never overlaps the previous one, and the pool refills when it runs out", () => {
  const first = takeRandom(4000)
  const before = randomPool.slice(first, first + 4000)
  const second = takeRandom(200)
  // 4,000 + 200 do not fit in 4 KB: the second draw starts a refilled pool at 0.
  expect(second).toBe(0)
  expect(Array.from(randomPool.slice(0, 200))).not.toEqual(Array.from(before.slice(0, 200)))
  const third = takeRandom(10)
  expect(third).toBe(200)
})

test("randomHex is the pool's next bytes in hex, as a byte-by-byte encoding writes them", () => {
  const at = takeRandom(0)
  const hex = randomHex(12)
  // The pool was not refilled in between (at most 12 of its 4 KB taken): the same bytes, read back.
  const bytes = at + 12 <= randomPool.length ? Array.from(randomPool.slice(at, at + 12)) : Array.from(randomPool.slice(0, 12))
  expect(hex).toBe(bytes.map((b) => b.toString(16).padStart(2, "0")).join(""))
  expect(hex).toMatch(/^[0-9a-f]{24}$/)
})
