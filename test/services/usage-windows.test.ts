import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { nextReset, windowStarts } from "../../src/domain/windows.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { at, newUserKey, useServices } from "../support/services.js"

const services = useServices()

/** A fresh key of a fresh user, with spend rows at the given times. */
const keyWithSpend = (
  options: { limit?: number; limitReset?: "daily" | "weekly" | "monthly" | null; includeByok?: boolean },
  rows: ReadonlyArray<{ at: string; usd: number; byok?: boolean }>,
) =>
  services().runPromise(
    Effect.gen(function* () {
      const keys = yield* KeyStore
      const { row, userId, workspaceId } = yield* newUserKey({
        name: "windows",
        limit: options.limit ?? null,
        limitReset: options.limitReset ?? null,
        includeByokInLimit: options.includeByok ?? false,
      })
      yield* keys.recordSpend(
        rows.map((r) => ({ keyHash: row.hash, userId, workspaceId, amountUsd: r.usd, isByok: r.byok ?? false, createdAt: r.at })),
      )
      return row
    }),
  )

const viewAt = (iso: string, row: Awaited<ReturnType<typeof keyWithSpend>>) =>
  services().runPromise(at(iso, Effect.flatMap(KeyStore, (keys) => keys.viewOne(row))))

describe("window starts (UTC)", () => {
  test("Sunday 23:59:59Z is still in the week that began Monday; Monday 00:00:00Z starts a new one", () => {
    expect(windowStarts(Date.parse("2026-11-22T23:59:59.999Z"))).toEqual({
      day: "2026-11-22T00:00:00.000Z",
      week: "2026-11-16T00:00:00.000Z",
      month: "2026-11-01T00:00:00.000Z",
    })
    expect(windowStarts(Date.parse("2026-11-23T00:00:00.000Z"))).toEqual({
      day: "2026-11-23T00:00:00.000Z",
      week: "2026-11-23T00:00:00.000Z",
      month: "2026-11-01T00:00:00.000Z",
    })
  })

  test("the next reset is midnight UTC, next Monday, or the 1st", () => {
    const now = Date.parse("2026-11-25T15:00:00Z") // a Wednesday
    expect(nextReset("daily", now)?.toISOString()).toBe("2026-11-26T00:00:00.000Z")
    expect(nextReset("weekly", now)?.toISOString()).toBe("2026-11-30T00:00:00.000Z")
    expect(nextReset("monthly", now)?.toISOString()).toBe("2026-12-01T00:00:00.000Z")
    expect(nextReset("weekly", Date.parse("2026-11-23T00:00:00Z"))?.toISOString()).toBe("2026-11-30T00:00:00.000Z")
    expect(nextReset(null, now)).toBeUndefined()
  })
})

describe("key usage from the spend ledger", () => {
  const rows = [
    { at: "2026-11-15T23:59:59.000Z", usd: 7 }, // the week before
    { at: "2026-11-16T00:00:00.000Z", usd: 1 }, // first instant of the week
    { at: "2026-11-22T23:59:59.000Z", usd: 3 }, // Sunday, last second of the week
    { at: "2026-11-22T12:00:00.000Z", usd: 5, byok: true },
  ]

  test("Sunday 23:59:59Z: the week holds Monday through Sunday", async () => {
    const row = await keyWithSpend({ limit: 10, limitReset: "weekly" }, rows)
    const v = await viewAt("2026-11-22T23:59:59.999Z", row)
    expect(v.usage).toBe(11)
    expect(v.usage_daily).toBe(3)
    expect(v.usage_weekly).toBe(4)
    expect(v.usage_monthly).toBe(11)
    expect(v.byok_usage).toBe(5)
    expect(v.byok_usage_daily).toBe(5)
    expect(v.byok_usage_weekly).toBe(5)
    expect(v.byok_usage_monthly).toBe(5)
    expect(v.limit_remaining).toBe(6)
  })

  test("Monday 00:00:00Z: the daily and weekly windows are empty again, the month is not", async () => {
    const row = await keyWithSpend({ limit: 10, limitReset: "weekly" }, rows)
    const v = await viewAt("2026-11-23T00:00:00.000Z", row)
    expect(v.usage_daily).toBe(0)
    expect(v.usage_weekly).toBe(0)
    expect(v.usage_monthly).toBe(11)
    expect(v.byok_usage_weekly).toBe(0)
    expect(v.limit_remaining).toBe(10)
  })

  test("month end: the 30th at 23:59:59Z counts November, the 1st at 00:00Z starts December", async () => {
    const row = await keyWithSpend({ limit: 20, limitReset: "monthly" }, [
      { at: "2026-11-30T23:59:59.000Z", usd: 4 },
      { at: "2026-11-02T00:00:00.000Z", usd: 2 },
    ])
    const before = await viewAt("2026-11-30T23:59:59.999Z", row)
    expect(before.usage_monthly).toBe(6)
    expect(before.limit_remaining).toBe(14)
    const after = await viewAt("2026-12-01T00:00:00.000Z", row)
    expect(after.usage_monthly).toBe(0)
    expect(after.usage).toBe(6)
    expect(after.limit_remaining).toBe(20)
  })

  test("daily reset: limit_remaining counts today only", async () => {
    const row = await keyWithSpend({ limit: 5, limitReset: "daily" }, [
      { at: "2026-11-21T23:59:59.999Z", usd: 4 },
      { at: "2026-11-22T00:00:00.000Z", usd: 1.5 },
    ])
    expect((await viewAt("2026-11-22T08:00:00Z", row)).limit_remaining).toBe(3.5)
  })

  test("BYOK spend counts toward the limit only with include_byok_in_limit", async () => {
    const spend = [
      { at: "2026-11-20T10:00:00Z", usd: 1 },
      { at: "2026-11-20T11:00:00Z", usd: 2, byok: true },
    ]
    const without = await keyWithSpend({ limit: 10 }, spend)
    const withByok = await keyWithSpend({ limit: 10, includeByok: true }, spend)
    expect((await viewAt("2026-11-22T00:00:00Z", without)).limit_remaining).toBe(9)
    expect((await viewAt("2026-11-22T00:00:00Z", withByok)).limit_remaining).toBe(7)
  })

  test("limit_remaining never goes below zero; no limit means null", async () => {
    const over = await keyWithSpend({ limit: 1 }, [{ at: "2026-11-20T10:00:00Z", usd: 3 }])
    expect((await viewAt("2026-11-22T00:00:00Z", over)).limit_remaining).toBe(0)
    const unlimited = await keyWithSpend({}, [{ at: "2026-11-20T10:00:00Z", usd: 3 }])
    const v = await viewAt("2026-11-22T00:00:00Z", unlimited)
    expect(v.limit).toBeNull()
    expect(v.limit_remaining).toBeNull()
  })
})
