/** Reading an exporter's config (already validated by its kind's Schema when it was stored). */

export const stringOf = (config: Readonly<Record<string, unknown>>, key: string): string => {
  const value = config[key]
  if (typeof value !== "string") throw new Error(`config.${key} is missing`)
  return value
}

/** A `headers` map's string values (others dropped). */
export const headersOf = (config: Readonly<Record<string, unknown>>): Record<string, string> => {
  const headers = config.headers
  if (typeof headers !== "object" || headers === null) return {}
  const out: Record<string, string> = {}
  for (const [name, value] of Object.entries(headers)) if (typeof value === "string") out[name] = value
  return out
}
