/**
 * docs/testing.md shows its examples whole: each `ts` fence is, to the character, the test file
 * the marker above it names, so the examples are the tests the suite runs and cannot drift.
 */
import { expect, test } from "bun:test"
import { readFileSync } from "node:fs"
import { join } from "node:path"

const root = join(import.meta.dir, "..", "..")
const doc = readFileSync(join(root, "docs/testing.md"), "utf8")
const fences = [...doc.matchAll(/<!-- needs: bun test \(it is the suite's (test\/testing\/[\w.-]+\.test\.ts)\) -->\n```ts\n([\s\S]*?)\n```/g)]

test("docs/testing.md has its examples, each naming its test file", () => {
  expect(fences.map((f) => f[1])).toEqual([
    "test/testing/fallback.test.ts",
    "test/testing/plugin.test.ts",
    "test/testing/adapter.test.ts",
    "test/testing/destination-retry.test.ts",
    "test/testing/daily-limit.test.ts",
    "test/testing/cooldown.test.ts",
    "test/testing/stores.test.ts",
  ])
  // Every ts fence of the page is one of them.
  expect(doc.match(/```ts\n/g)?.length).toBe(fences.length)
})

for (const [, file, code] of fences) {
  test(`${file} is shown as it is`, () => {
    expect(code).toBe(readFileSync(join(root, file as string), "utf8").replace(/\n$/, ""))
  })
}
