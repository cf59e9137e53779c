/** `database.pool_size`: each process's Postgres pool (every worker of `--workers` has its own), checked like every setting. */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { parseConfigFile } from "../../src/config/Config.js"

const file = (database: unknown) => JSON.stringify({ providers: [{ id: "fake", kind: "fake" }], models: [], database })

describe("database.pool_size", () => {
  test("an integer from 1 to 1000 is taken", () => {
    const parsed = parseConfigFile("c.json", file({ pool_size: 8 }))
    expect(Either.isRight(parsed) && parsed.right.database?.pool_size).toBe(8)
  })

  test("0 is refused, naming the setting and the rule", () => {
    const parsed = parseConfigFile("c.json", file({ pool_size: 0 }))
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("database.pool_size")
    expect(Either.isLeft(parsed) && parsed.left.message).toContain("must be an integer from 1 to 1000")
  })
})
