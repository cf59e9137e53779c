/**
 * Snowflake: its SQL API, `POST https://<account>.snowflakecomputing.com/api/v2/statements`, with the
 * token as Bearer and its kind in `X-Snowflake-Authorization-Token-Type` (a programmatic access token
 * unless `tokenType` says OAUTH or KEYPAIR_JWT). Each delivery sends `CREATE TABLE IF NOT EXISTS`,
 * then one `INSERT … SELECT ?, … UNION ALL SELECT …` whose values are all bind variables (none in the
 * SQL text; identifiers double-quoted). `database`, `schema`, `warehouse` and `role` go in the request
 * body (the user's defaults when absent). The insert's `requestId` derives from the batch's generation
 * ids with `retry=true`, so Snowflake does not run a resubmitted statement twice.
 */
import { Schema } from "effect"
import { configLiteral, ConfigSqlIdentifier, ConfigText } from "../../domain/destinations.js"
import { defineKind, type OutboundRequest } from "../exporter.js"
import { stableUuid, withConfig } from "./vendor-config.js"
import { COLUMNS, type ColumnType, type Row, rowOf } from "./rows.js"

export const SNOWFLAKE_TABLE = "GATEWAY_GENERATIONS"

/** A double-quoted identifier (inner quotes doubled). Quoted names are case-sensitive in Snowflake. */
export const quoteIdentifier = (name: string): string => `"${name.replace(/"/g, '""')}"`

const column = (name: string) => quoteIdentifier(name.toUpperCase())

const TYPES: Record<ColumnType, string> = {
  string: "VARCHAR",
  "nullable-string": "VARCHAR",
  timestamp: "TIMESTAMP_TZ",
  int: "NUMBER(38,0)",
  "nullable-int": "NUMBER(38,0)",
  bool: "BOOLEAN",
  "nullable-float": "FLOAT",
}

// JSON columns are VARIANT, parsed from their text on insert.
const VARIANT = new Set(["input", "metadata"])

export const createTableSql = (table: string): string =>
  `CREATE TABLE IF NOT EXISTS ${quoteIdentifier(table)} (${COLUMNS.map(
    ([name, type]) => `${column(name)} ${VARIANT.has(name) ? "VARIANT" : TYPES[type]}`,
  ).join(", ")})`

// PARSE_JSON is not allowed in a VALUES clause, hence INSERT … SELECT.
const selectOne = COLUMNS.map(([name, type]) =>
  VARIANT.has(name) ? "PARSE_JSON(?)" : type === "timestamp" ? "TO_TIMESTAMP_TZ(?)" : "?",
).join(", ")

export const insertSql = (table: string, rows: number): string =>
  `INSERT INTO ${quoteIdentifier(table)} (${COLUMNS.map(([name]) => column(name)).join(", ")}) ${Array.from(
    { length: rows },
    () => `SELECT ${selectOne}`,
  ).join(" UNION ALL ")}`

type Binding = { readonly type: "TEXT" | "FIXED" | "REAL" | "BOOLEAN"; readonly value: string | null }

const BIND_TYPES: Record<ColumnType, Binding["type"]> = {
  string: "TEXT",
  "nullable-string": "TEXT",
  timestamp: "TEXT",
  int: "FIXED",
  "nullable-int": "FIXED",
  bool: "BOOLEAN",
  "nullable-float": "REAL",
}

/** The bind variables of `rows`, numbered from 1 across rows in column order (the SQL API's string values). */
export const bindings = (rows: ReadonlyArray<Row>): Record<string, Binding> => {
  const out: Record<string, Binding> = {}
  let n = 1
  for (const row of rows) {
    for (const [name, type] of COLUMNS) {
      const value = row[name]
      out[String(n++)] = { type: BIND_TYPES[type], value: value === null || value === undefined ? null : String(value) }
    }
  }
  return out
}

// A name that becomes part of a host name must not be able to change the host.
const SnowflakeAccount = ConfigText.pipe(
  Schema.filter((a) => /^[A-Za-z0-9._-]{1,255}$/.test(a) || "must be an account identifier like xy12345.us-east-1 or myorg-myaccount"),
)

/** Its config: required keys are required, unknown keys are refused. */
const Config = Schema.Struct({
  account: SnowflakeAccount,
  token: ConfigText,
  tokenType: Schema.optional(configLiteral(["PROGRAMMATIC_ACCESS_TOKEN", "OAUTH", "KEYPAIR_JWT"])),
  database: Schema.optional(ConfigSqlIdentifier),
  schema: Schema.optional(ConfigSqlIdentifier),
  table: Schema.optional(ConfigSqlIdentifier),
  warehouse: Schema.optional(ConfigSqlIdentifier),
  role: Schema.optional(ConfigSqlIdentifier),
})

export const snowflake = defineKind({
  kind: "snowflake",
  config: Config,
  secretFields: ["token"],
  secretMaps: [],
  deliver: (raw, batch) =>
    withConfig(Config, raw, (config) => {
      const url = `https://${config.account}.snowflakecomputing.com/api/v2/statements`
      const headers = {
        authorization: `Bearer ${config.token}`,
        "x-snowflake-authorization-token-type": config.tokenType ?? "PROGRAMMATIC_ACCESS_TOKEN",
        "content-type": "application/json",
        accept: "application/json",
      }
      const context = {
        ...(config.database === undefined ? {} : { database: config.database }),
        ...(config.schema === undefined ? {} : { schema: config.schema }),
        ...(config.warehouse === undefined ? {} : { warehouse: config.warehouse }),
        ...(config.role === undefined ? {} : { role: config.role }),
      }
      const table = config.table ?? SNOWFLAKE_TABLE
      const rows = batch.generations.map(rowOf)
      const requestId = stableUuid(`snowflake:${batch.generations.map((g) => g.id).join(",")}`)
      const requests: Array<OutboundRequest> = [
        { url, method: "POST", headers, body: JSON.stringify({ statement: createTableSql(table), timeout: 60, ...context }) },
        {
          url: `${url}?${new URLSearchParams({ requestId, retry: "true" }).toString()}`,
          method: "POST",
          headers,
          body: JSON.stringify({ statement: insertSql(table, rows.length), bindings: bindings(rows), timeout: 60, ...context }),
        },
      ]
      return { requests }
    }),
})
