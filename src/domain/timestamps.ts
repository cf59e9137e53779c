/**
 * Timestamps a caller sends: RFC 3339 (ISO 8601 with a zone), every field in range and the date
 * a real one. `Date.parse` alone is not a validator: it rolls `2099-02-30` over to March 2 and
 * `24:00` to the next day, and answers NaN for an offset of `+25:00`.
 */
import { Schema } from "effect"

const ZONED = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(?:Z|[+-](\d{2}):(\d{2}))$/

const isLeapYear = (year: number) => (year % 4 === 0 && year % 100 !== 0) || year % 400 === 0

/** Days in a month (1-12) of a year. */
const daysIn = (year: number, month: number) =>
  month === 2 ? (isLeapYear(year) ? 29 : 28) : [4, 6, 9, 11].includes(month) ? 30 : 31

/** Whether `year-month-day` names a day of the calendar (month 1-12, day 1 to the month's last). */
export const isCalendarDate = (year: number, month: number, day: number): boolean =>
  month >= 1 && month <= 12 && day >= 1 && day <= daysIn(year, month)

/**
 * The instant of a zoned timestamp in epoch milliseconds, or undefined when the text is none:
 * hours 00-23, minutes and seconds 00-59 (a leap second `:60` has no instant a Date can hold),
 * offsets up to ±23:59.
 */
export const zonedTimestampMs = (text: string): number | undefined => {
  const m = ZONED.exec(text)
  if (m === null) return undefined
  const [year, month, day, hour, minute, second] = m.slice(1, 7).map(Number) as [number, number, number, number, number, number]
  const offsetHour = m[8] === undefined ? 0 : Number(m[8])
  const offsetMinute = m[9] === undefined ? 0 : Number(m[9])
  if (!isCalendarDate(year, month, day) || hour > 23 || minute > 59 || second > 59 || offsetHour > 23 || offsetMinute > 59) {
    return undefined
  }
  const ms = Date.parse(text)
  return Number.isNaN(ms) ? undefined : ms
}

/** A zoned timestamp on the wire (the handler turns a valid one into UTC text). */
export const ZonedTimestamp = Schema.String.pipe(
  Schema.filter((text) => zonedTimestampMs(text) !== undefined, {
    message: () =>
      "must be an ISO 8601 timestamp with a zone (YYYY-MM-DDTHH:MM:SS, optional fraction, then Z or ±HH:MM) whose fields are in range and whose date exists, e.g. 2026-11-22T10:00:00Z",
  }),
)
