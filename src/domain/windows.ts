/** Spend windows in UTC: the day from 00:00, the week from Monday 00:00, the calendar month. */
import type { LimitReset } from "./keys.js"

export interface WindowStarts {
  readonly day: string
  readonly week: string
  readonly month: string
}

export const windowStarts = (nowMs: number): WindowStarts => {
  const now = new Date(nowMs)
  const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())
  const sinceMonday = (now.getUTCDay() + 6) % 7
  const week = day - sinceMonday * 86_400_000
  const month = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1)
  return { day: new Date(day).toISOString(), week: new Date(week).toISOString(), month: new Date(month).toISOString() }
}

/** When the window containing `nowMs` ends (the next reset), or undefined for no reset. */
export const nextReset = (reset: LimitReset | null, nowMs: number): Date | undefined => {
  if (reset === null) return undefined
  const now = new Date(nowMs)
  const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate())
  if (reset === "daily") return new Date(day + 86_400_000)
  if (reset === "weekly") return new Date(day + (7 - ((now.getUTCDay() + 6) % 7)) * 86_400_000)
  return new Date(Date.UTC(now.getUTCFullYear(), now.getUTCMonth() + 1, 1))
}

/** The start of the limit window (ISO) for a reset policy; undefined means all time. */
export const limitWindowStart = (reset: LimitReset | null, nowMs: number): string | undefined => {
  if (reset === null) return undefined
  const w = windowStarts(nowMs)
  return reset === "daily" ? w.day : reset === "weekly" ? w.week : w.month
}
