/** The router's small parts: model id forms, the sticky map's bounds, the health book's averages. */
import { describe, expect, test } from "bun:test"
import { EndpointHealth } from "../../src/routing/health.js"
import { parseModelRef, splitPreset } from "../../src/routing/model-id.js"
import { StickySessions } from "../../src/routing/sticky.js"

describe("model ids", () => {
  const known = (id: string) => id === "v/m" || id === "v/m:free"

  test("suffixes :nitro, :floor and :free split off unless the catalog knows the whole id", () => {
    expect(parseModelRef("v/m", known)).toEqual({ id: "v/m", variant: undefined })
    expect(parseModelRef("v/x:nitro", known)).toEqual({ id: "v/x", variant: "nitro" })
    expect(parseModelRef("v/x:floor", known)).toEqual({ id: "v/x", variant: "floor" })
    expect(parseModelRef("v/x:free", known)).toEqual({ id: "v/x", variant: "free" })
    expect(parseModelRef("v/m:free", known)).toEqual({ id: "v/m:free", variant: undefined })
    expect(parseModelRef("v/x:beta", known)).toEqual({ id: "v/x:beta", variant: undefined })
  })

  test("@preset/slug alone and after a model", () => {
    expect(splitPreset("@preset/fast")).toEqual({ model: undefined, preset: "fast" })
    expect(splitPreset("v/m@preset/fast")).toEqual({ model: "v/m", preset: "fast" })
    expect(splitPreset("v/m")).toEqual({ model: "v/m", preset: undefined })
  })
})

describe("sticky map", () => {
  test("is bounded: the least recently used entry goes first", () => {
    const sticky = new StickySessions({ maxEntries: 3, ttlMs: 1000 })
    sticky.set("a", "e1", 0)
    sticky.set("b", "e2", 0)
    sticky.set("c", "e3", 0)
    expect(sticky.get("a", 1)).toBe("e1")
    sticky.set("d", "e4", 1)
    expect(sticky.size).toBe(3)
    expect(sticky.get("b", 2)).toBeUndefined()
    expect(sticky.get("a", 2)).toBe("e1")
    expect(sticky.get("d", 2)).toBe("e4")
  })

  test("entries expire a TTL after they were set", () => {
    const sticky = new StickySessions({ ttlMs: 100 })
    sticky.set("a", "e1", 0)
    expect(sticky.get("a", 99)).toBe("e1")
    expect(sticky.get("a", 100)).toBeUndefined()
    expect(sticky.size).toBe(0)
  })
})

describe("endpoint health", () => {
  test("cooldowns grow 30 s, 60 s, 120 s … up to the cap while failures continue", () => {
    const health = new EndpointHealth({ maxCooldownMs: 100_000 })
    let now = 0
    for (let i = 0; i < 3; i++) health.recordFailure("e", now)
    expect(health.stats("e").cooldownUntil).toBe(30_000)
    // Failures during the cooldown (the endpoint as a last resort) do not extend it.
    health.recordFailure("e", 10_000)
    expect(health.stats("e").cooldownUntil).toBe(30_000)
    now = 30_000
    health.recordFailure("e", now)
    expect(health.stats("e").cooldownUntil).toBe(90_000)
    now = 90_000
    health.recordFailure("e", now)
    expect(health.stats("e").cooldownUntil).toBe(190_000)
    now = 190_000
    health.recordFailure("e", now)
    expect(health.stats("e").cooldownUntil).toBe(290_000)
    health.recordSuccess("e")
    expect(health.isCoolingDown("e", now)).toBe(false)
    expect(health.stats("e").consecutiveFailures).toBe(0)
  })

  test("latency and throughput are rolling averages", () => {
    const health = new EndpointHealth({ alpha: 0.5 })
    expect(health.latencyOf("e")).toBeUndefined()
    health.recordLatency("e", 100)
    health.recordLatency("e", 200)
    expect(health.latencyOf("e")).toBe(150)
    health.recordThroughput("e", 40)
    health.recordThroughput("e", 20)
    expect(health.throughputOf("e")).toBe(30)
    health.recordThroughput("e", Number.NaN)
    expect(health.throughputOf("e")).toBe(30)
  })
})
