/**
 * The rolling windows behind the endpoints listing: uptime over 5 minutes, 30 minutes and a day
 * in time buckets, and 30-minute percentiles of the latest samples. The clock is passed in.
 */
import { describe, expect, test } from "bun:test"
import { RollingStats, SAMPLE_CAPACITY } from "../../src/routing/rolling.js"

const MIN = 60_000
const HOUR = 60 * MIN
/** A time at the start of a minute and an hour, so bucket edges are where the tests say. */
const T0 = 1_000 * HOUR

describe("uptime windows", () => {
  test("an endpoint never called has no uptime (null, not 100)", () => {
    const s = new RollingStats().snapshot("e", T0)
    expect(s).toEqual({ uptime5m: null, uptime30m: null, uptime1d: null, latency30m: null, throughput30m: null })
  })

  test("uptime is answered attempts over all counted attempts, in percent", () => {
    const stats = new RollingStats()
    for (let i = 0; i < 3; i++) stats.recordOutcome("e", true, T0)
    stats.recordOutcome("e", false, T0)
    const s = stats.snapshot("e", T0 + 1_000)
    expect(s.uptime5m).toBe(75)
    expect(s.uptime30m).toBe(75)
    expect(s.uptime1d).toBe(75)
  })

  test("a failure 10 minutes ago leaves the 5-minute window but stays in the 30-minute one and the day", () => {
    const stats = new RollingStats()
    stats.recordOutcome("e", false, T0)
    stats.recordOutcome("e", true, T0 + 10 * MIN)
    const s = stats.snapshot("e", T0 + 10 * MIN)
    expect(s.uptime5m).toBe(100)
    expect(s.uptime30m).toBe(50)
    expect(s.uptime1d).toBe(50)
  })

  test("after 31 minutes only the day remembers; after 25 hours nothing does", () => {
    const stats = new RollingStats()
    stats.recordOutcome("e", false, T0)
    expect(stats.snapshot("e", T0 + 31 * MIN)).toMatchObject({ uptime5m: null, uptime30m: null, uptime1d: 0 })
    expect(stats.snapshot("e", T0 + 25 * HOUR)).toMatchObject({ uptime1d: null })
  })

  test("a reused bucket slot starts from zero (30 minutes later, same slot)", () => {
    const stats = new RollingStats()
    stats.recordOutcome("e", false, T0)
    stats.recordOutcome("e", true, T0 + 30 * MIN)
    expect(stats.snapshot("e", T0 + 30 * MIN).uptime5m).toBe(100)
  })

  test("endpoints are counted apart", () => {
    const stats = new RollingStats()
    stats.recordOutcome("a", false, T0)
    stats.recordOutcome("b", true, T0)
    expect(stats.snapshot("a", T0).uptime5m).toBe(0)
    expect(stats.snapshot("b", T0).uptime5m).toBe(100)
  })
})

describe("30-minute percentiles", () => {
  test("p50, p75, p90, p99 are nearest-rank over the samples of the window", () => {
    const stats = new RollingStats()
    for (let v = 1; v <= 100; v++) stats.recordLatency("e", v, T0 + v)
    expect(stats.snapshot("e", T0 + 1_000).latency30m).toEqual({ p50: 50, p75: 75, p90: 90, p99: 99 })
  })

  test("one sample is every percentile", () => {
    const stats = new RollingStats()
    stats.recordThroughput("e", 42.5, T0)
    expect(stats.snapshot("e", T0).throughput30m).toEqual({ p50: 42.5, p75: 42.5, p90: 42.5, p99: 42.5 })
  })

  test("samples older than 30 minutes leave the window", () => {
    const stats = new RollingStats()
    stats.recordLatency("e", 1_000, T0)
    stats.recordLatency("e", 10, T0 + 20 * MIN)
    expect(stats.snapshot("e", T0 + 20 * MIN).latency30m?.p99).toBe(1_000)
    expect(stats.snapshot("e", T0 + 31 * MIN).latency30m).toEqual({ p50: 10, p75: 10, p90: 10, p99: 10 })
    expect(stats.snapshot("e", T0 + 60 * MIN).latency30m).toBeNull()
  })

  test(`only the latest ${SAMPLE_CAPACITY} samples are kept`, () => {
    const stats = new RollingStats()
    for (let i = 0; i < SAMPLE_CAPACITY; i++) stats.recordLatency("e", 1_000, T0)
    for (let i = 0; i < SAMPLE_CAPACITY; i++) stats.recordLatency("e", 5, T0 + 1)
    expect(stats.snapshot("e", T0 + 2).latency30m).toEqual({ p50: 5, p75: 5, p90: 5, p99: 5 })
  })

  test("non-finite, negative latency and non-positive throughput are not samples", () => {
    const stats = new RollingStats()
    stats.recordLatency("e", Number.NaN, T0)
    stats.recordLatency("e", -1, T0)
    stats.recordThroughput("e", 0, T0)
    stats.recordThroughput("e", Number.POSITIVE_INFINITY, T0)
    const s = stats.snapshot("e", T0)
    expect(s.latency30m).toBeNull()
    expect(s.throughput30m).toBeNull()
  })
})
