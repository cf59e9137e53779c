/** The datetime server tool: IANA zone, default UTC → ISO 8601 with the offset; an unknown zone is a failed result. */
import { describe, expect, test } from "bun:test"
import { testSettings } from "../../src/config/Config.js"
import { datetimeTool, isoInZone } from "../../src/tools/datetime.js"
import { serverToolOf } from "../../src/tools/index.js"
import type { ServerToolContext } from "../../src/tools/types.js"

const ctx: ServerToolContext = { settings: testSettings(), signal: new AbortController().signal, workspaceId: "ws", callsSoFar: 0 }
const ISO_WITH_OFFSET = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d\d:\d\d$/

describe("datetime", () => {
  test("is in the registry as openrouter:datetime, offered as the function datetime, always available", () => {
    expect(serverToolOf("openrouter:datetime")).toBe(datetimeTool)
    expect(datetimeTool.name).toBe("datetime")
    expect(datetimeTool.unavailable(testSettings())).toBeUndefined()
  })

  test("isoInZone: the wall time and offset of a zone, summer and winter", () => {
    const winter = new Date("2026-01-15T12:00:00Z")
    const summer = new Date("2026-07-15T12:00:00Z")
    expect(isoInZone(winter, "UTC")).toBe("2026-01-15T12:00:00+00:00")
    expect(isoInZone(winter, "America/New_York")).toBe("2026-01-15T07:00:00-05:00")
    expect(isoInZone(summer, "America/New_York")).toBe("2026-07-15T08:00:00-04:00")
    expect(isoInZone(winter, "Asia/Kolkata")).toBe("2026-01-15T17:30:00+05:30")
    expect(isoInZone(new Date("2026-01-15T23:30:00Z"), "Pacific/Chatham")).toBe("2026-01-16T13:15:00+13:45")
  })

  test("no timezone: UTC; the item and the model's output carry the same datetime", async () => {
    const r = await datetimeTool.run({}, {}, ctx)
    expect(r.item["type"]).toBe("openrouter:datetime")
    expect(r.item["status"]).toBe("completed")
    expect(r.item["timezone"]).toBe("UTC")
    expect(r.item["datetime"]).toMatch(ISO_WITH_OFFSET)
    expect(JSON.parse(r.modelOutput)).toEqual({ datetime: r.item["datetime"], timezone: "UTC" })
    expect(r.cost).toBe(0)
  })

  test("the request's parameters.timezone, and the model's own argument over it", async () => {
    const configured = await datetimeTool.run({}, { timezone: "Europe/Paris" }, ctx)
    expect(configured.item["timezone"]).toBe("Europe/Paris")
    const asked = await datetimeTool.run({ timezone: "Asia/Tokyo" }, { timezone: "Europe/Paris" }, ctx)
    expect(asked.item["timezone"]).toBe("Asia/Tokyo")
    expect(String(asked.item["datetime"])).toEndWith("+09:00")
  })

  test("an unknown zone is a failed result naming it, not a throw", async () => {
    const r = await datetimeTool.run({ timezone: "Mars/Olympus_Mons" }, {}, ctx)
    expect(r.item["status"]).toBe("incomplete")
    expect(JSON.parse(r.modelOutput)).toEqual({ status: "failed", error: 'unknown time zone "Mars/Olympus_Mons"' })
  })

  test("a timezone that is not a string is a failed result", async () => {
    const r = await datetimeTool.run({ timezone: 42 }, {}, ctx)
    expect(JSON.parse(r.modelOutput).status).toBe("failed")
  })
})
