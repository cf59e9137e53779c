/**
 * The one migration set both engines run, in order. Append new migrations; never edit one
 * that has shipped. Portable SQL; where dialects differ, `sql.onDialectOrElse` in that query.
 */
import type { SqlClient, SqlError } from "@effect/sql"
import type { Effect } from "effect"
import foundation from "./0001_foundation.js"

export interface Migration {
  readonly id: number
  readonly name: string
  readonly up: Effect.Effect<void, SqlError.SqlError, SqlClient.SqlClient>
}

export const migrations: ReadonlyArray<Migration> = [{ id: 1, name: "foundation", up: foundation }]
