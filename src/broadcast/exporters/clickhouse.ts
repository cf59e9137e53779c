/**
 * ClickHouse: its HTTP interface, one row per generation in a table the exporter creates. Each
 * delivery sends `CREATE TABLE IF NOT EXISTS` first (cheap when it exists, and it comes back if the
 * table is dropped), then `INSERT INTO … FORMAT JSONEachRow` with the rows in the body: identifiers
 * are quoted, values never enter the SQL text. The table is a ReplacingMergeTree ordered by start
 * time and generation id, so a repeated delivery collapses into one row on merge.
 * Auth: `X-ClickHouse-User` / `X-ClickHouse-Key` (the server refuses a second method beside them). `host` is a URL, or host[:port] (https, 8443).
 */
import { Schema } from "effect"
import { ConfigSqlIdentifier, ConfigText, isHttpUrl, receiverValues } from "../../domain/destinations.js"
import { defineKind, type OutboundRequest } from "../exporter.js"
import { withConfig } from "./vendor-config.js"
import { COLUMNS, type ColumnType, rowOf } from "./rows.js"

export const CLICKHOUSE_TABLE = "gateway_generations"

/** A backtick-quoted identifier (backslash and backtick escaped). */
export const quoteIdentifier = (name: string): string => `\`${name.replace(/\\/g, "\\\\").replace(/`/g, "\\`")}\``

const TYPES: Record<ColumnType, string> = {
  string: "String",
  "nullable-string": "Nullable(String)",
  timestamp: "DateTime64(3, 'UTC')",
  int: "UInt64",
  "nullable-int": "Nullable(UInt32)",
  bool: "Bool",
  "nullable-float": "Nullable(Float64)",
}

export const createTableSql = (database: string, table: string): string =>
  `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(database)}.${quoteIdentifier(table)} (${COLUMNS.map(
    ([name, type]) => `${quoteIdentifier(name)} ${TYPES[type]}`,
  ).join(", ")}) ENGINE = ReplacingMergeTree ORDER BY (${quoteIdentifier("start_time")}, ${quoteIdentifier("generation_id")})`

export const insertSql = (database: string, table: string): string =>
  `INSERT INTO ${quoteIdentifier(database)}.${quoteIdentifier(table)} FORMAT JSONEachRow`

/** The HTTP interface's base URL: as given, or https://host:8443 for a bare host (ClickHouse Cloud's port). */
export const clickhouseBase = (host: string): string => {
  if (/^https?:\/\//.test(host)) return host.replace(/\/+$/, "")
  return /:\d+$/.test(host) ? `https://${host}` : `https://${host}:8443`
}

// The HTTP interface: a URL, or host[:port] (then https, port 8443 when none is given).
const isClickHouseHost = (host: string) =>
  /^https?:\/\//.test(host) ? isHttpUrl(host) : /^[A-Za-z0-9.-]+(:\d{1,5})?$/.test(host)
const ClickHouseHost = ConfigText.pipe(
  Schema.filter((h) => isClickHouseHost(h) || "must be an http(s) URL or host[:port] of the HTTP interface"),
)

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({
  host: ClickHouseHost,
  database: ConfigText,
  username: ConfigText,
  password: ConfigText,
  table: Schema.optional(ConfigSqlIdentifier),
})

export const clickhouse = defineKind({
  kind: "clickhouse",
  config: Config,
  secretFields: ["password"],
  secretMaps: [],
  // A `host[:port]` is reached over https.
  receivers: (config) =>
    receiverValues(config).map(({ key, url }) => ({ key, url: /^https?:\/\//.test(url) ? url : `https://${url}` })),
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => {
      const base = clickhouseBase(config.host)
      const table = config.table ?? CLICKHOUSE_TABLE
      const headers = {
        "x-clickhouse-user": config.username,
        "x-clickhouse-key": config.password,
      }
      const query = (sql: string, settings: Record<string, string> = {}) =>
        `${base}/?${new URLSearchParams({ query: sql, ...settings }).toString()}`
      const requests: Array<OutboundRequest> = [
        { url: query(createTableSql(config.database, table)), method: "POST", headers, body: "" },
        {
          url: query(insertSql(config.database, table), { date_time_input_format: "best_effort" }),
          method: "POST",
          headers: { ...headers, "content-type": "application/x-ndjson" },
          body: batch.generations.map((g) => JSON.stringify(rowOf(g))).join("\n"),
        },
      ]
      return { requests }
    }),
})
