/** Wire-compat's required keys, checked key by key (a missing key breaks real clients). */
import { expect } from "bun:test"

const zoned = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$/

type Kind = "string" | "number" | "boolean" | "int" | "zoned" | "array" | "object"
type Spec = Record<string, ReadonlyArray<Kind | "null">>

export const expectShape = (value: unknown, spec: Spec) => {
  expect(typeof value).toBe("object")
  const obj = value as Record<string, unknown>
  for (const [key, kinds] of Object.entries(spec)) {
    expect(Object.keys(obj)).toContain(key)
    const v = obj[key]
    const ok = kinds.some((k) => {
      switch (k) {
        case "null":
          return v === null
        case "int":
          return Number.isInteger(v)
        case "zoned":
          return typeof v === "string" && zoned.test(v)
        case "array":
          return Array.isArray(v)
        case "object":
          return typeof v === "object" && v !== null && !Array.isArray(v)
        default:
          return typeof v === k
      }
    })
    if (!ok) throw new Error(`${key}: expected ${kinds.join("|")}, got ${JSON.stringify(v)}`)
  }
}

export const API_KEY: Spec = {
  hash: ["string"],
  name: ["string"],
  label: ["string"],
  disabled: ["boolean"],
  limit: ["number", "null"],
  limit_remaining: ["number", "null"],
  limit_reset: ["string", "null"],
  include_byok_in_limit: ["boolean"],
  usage: ["number"],
  usage_daily: ["number"],
  usage_weekly: ["number"],
  usage_monthly: ["number"],
  byok_usage: ["number"],
  byok_usage_daily: ["number"],
  byok_usage_weekly: ["number"],
  byok_usage_monthly: ["number"],
  created_at: ["zoned"],
  updated_at: ["zoned", "null"],
  creator_user_id: ["string", "null"],
  workspace_id: ["string"],
  external_user: ["string", "null"],
}
