/**
 * How the Postgres client reads numbers: int8 (BIGINT, COUNT) and numeric (what SUM of a BIGINT
 * returns) come back as JS numbers instead of strings. Money is BIGINT nano-dollars: exact in a
 * JS number up to 2^53 nano-dollars (~$9M), far above any one key's or user's sums.
 */
import pg, { type TypeParsers } from "pg"

const INT8 = 20
const NUMERIC = 1700

const defaults = pg.types

/** `types` for the pg pool: its defaults, with int8 and numeric read as numbers. */
export const pgTypes: TypeParsers = {
  getTypeParser: (oid, format) => (format !== "binary" && (oid === INT8 || oid === NUMERIC) ? Number : defaults.getTypeParser(oid, format)),
}
