/**
 * `openrouter:datetime` (docs/server-tools.md): the current date and time in an IANA zone (default UTC),
 * as ISO 8601 with its offset. An unknown zone is a failed tool result the model sees, never a 500.
 */
import type { ServerTool, ServerToolResult } from "./types.js"

const DEFAULT_ZONE = "UTC"

const pad = (n: number, width = 2) => String(n).padStart(width, "0")

/** `at` in `timeZone` as `YYYY-MM-DDTHH:mm:ss±HH:MM`; throws a RangeError for a zone Intl does not know. */
export const isoInZone = (at: Date, timeZone: string): string => {
  const parts = new Intl.DateTimeFormat("en-US", {
    timeZone,
    hourCycle: "h23",
    year: "numeric",
    month: "2-digit",
    day: "2-digit",
    hour: "2-digit",
    minute: "2-digit",
    second: "2-digit",
  }).formatToParts(at)
  const field = (type: Intl.DateTimeFormatPartTypes) => Number(parts.find((p) => p.type === type)?.value ?? 0)
  const wall = Date.UTC(field("year"), field("month") - 1, field("day"), field("hour"), field("minute"), field("second"))
  const offsetMinutes = Math.round((wall - Math.floor(at.getTime() / 1000) * 1000) / 60_000)
  const sign = offsetMinutes < 0 ? "-" : "+"
  const abs = Math.abs(offsetMinutes)
  const date = `${pad(field("year"), 4)}-${pad(field("month"))}-${pad(field("day"))}`
  const time = `${pad(field("hour"))}:${pad(field("minute"))}:${pad(field("second"))}`
  return `${date}T${time}${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`
}

/** The zone the call asks for: the model's argument, else the request's tool parameter, else UTC. */
const zoneOf = (args: unknown, toolParameters: Readonly<Record<string, unknown>>): unknown => {
  if (typeof args === "object" && args !== null && "timezone" in args && (args as { timezone: unknown }).timezone != null) {
    return (args as { timezone: unknown }).timezone
  }
  return toolParameters["timezone"] ?? DEFAULT_ZONE
}

export const datetimeTool: ServerTool<"openrouter:datetime"> = {
  type: "openrouter:datetime",
  name: "datetime",
  description: "Returns the current date and time (ISO 8601 with the UTC offset) in an IANA time zone.",
  parameters: {
    type: "object",
    properties: { timezone: { type: "string", description: 'IANA time zone name, e.g. "Europe/Paris"; default UTC' } },
    additionalProperties: false,
  },
  unavailable: () => undefined,
  // The SDK's item requires both strings: the zone asked for, and no time until the call has run.
  opening: (args, toolParameters) => ({ datetime: "", timezone: String(zoneOf(args, toolParameters)) }),
  run: async (args, toolParameters): Promise<ServerToolResult> => {
    const zone = zoneOf(args, toolParameters)
    if (typeof zone !== "string" || zone === "") return failed(String(zone), "timezone must be an IANA time zone name")
    let datetime: string
    try {
      datetime = isoInZone(new Date(), zone)
    } catch {
      return failed(zone, `unknown time zone ${JSON.stringify(zone)}`)
    }
    return {
      modelOutput: JSON.stringify({ datetime, timezone: zone }),
      item: { type: "openrouter:datetime", status: "completed", datetime, timezone: zone },
      cost: 0,
    }
  },
}

const failed = (zone: string, error: string): ServerToolResult => ({
  modelOutput: JSON.stringify({ status: "failed", error }),
  // The SDK's item requires both strings; the status says it did not complete.
  item: { type: "openrouter:datetime", status: "incomplete", datetime: "", timezone: zone },
  cost: 0,
})
