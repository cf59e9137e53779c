/**
 * Whether a failure means the store cannot be reached or cannot take writes for now (docs/operations.md,
 * "When the database goes away"), as opposed to a statement that is wrong: the ledger writer spools
 * the first kind and retries it, and a request that meets it is answered 503 with `Retry-After`.
 */
import { Cause, Runtime } from "effect"

/** A commit that did not end in time (a connection that stalls without closing). */
export class StoreTimeout extends Error {
  readonly code = "STORE_TIMEOUT"
  constructor(ms: number) {
    super(`the store did not answer within ${ms} ms`)
  }
}

/** Node's and pg's connection failures. */
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "ECONNABORTED",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "STORE_TIMEOUT",
])

/** Postgres SQLSTATEs of a server going away or not taking connections (class 08, 57P01-57P03, 53300). */
const PG_STATES = /^(08...|57P0[123]|53300)$/

/** SQLite's codes for a file that cannot be written now: full, read-only, an I/O error, locked past the wait. */
const SQLITE_CODES = /^SQLITE_(FULL|READONLY|IOERR|CANTOPEN|BUSY|LOCKED|PROTOCOL|NOMEM)/

/** pg's own messages for a connection that ended (they carry no code). */
const PG_MESSAGES = /Connection terminated|connection error|not queryable|timeout exceeded when trying to connect|Failed to acquire connection|Connection error|Connection timed out/i

const unavailableHere = (e: unknown): boolean => {
  if (typeof e !== "object" || e === null) return false
  const code = (e as { code?: unknown }).code
  if (typeof code === "string" && (NETWORK_CODES.has(code) || PG_STATES.test(code) || SQLITE_CODES.test(code))) return true
  const message = (e as { message?: unknown }).message
  return typeof message === "string" && PG_MESSAGES.test(message)
}

/** The first of `e` and its causes (six deep at most) that `found` accepts; a rejected runPromise's failure is read in its cause. */
const causeWhere = (e: unknown, found: (at: object) => boolean): object | undefined => {
  let at: unknown = Runtime.isFiberFailure(e) ? Cause.squash(e[Runtime.FiberFailureCauseId]) : Cause.isCause(e) ? Cause.squash(e) : e
  for (let depth = 0; depth < 6 && typeof at === "object" && at !== null; depth++) {
    if (found(at)) return at
    at = (at as { cause?: unknown }).cause
  }
  return undefined
}

/** `e` or one of its causes is the store being unreachable or unwritable. */
export const isStoreUnavailable = (e: unknown): boolean => causeWhere(e, unavailableHere) !== undefined

/** The store's own error in `e` or its causes (an @effect/sql SqlError, bun:sqlite's SQLiteError), or undefined: a failure of the store that is not its being unreachable. */
export const storeFailureIn = (e: unknown): Error | undefined =>
  causeWhere(e, (at) => at instanceof Error && ((at as { _tag?: unknown })._tag === "SqlError" || at.name === "SQLiteError")) as Error | undefined

/**
 * A store failure in one line: the error's message and its cause's. A SqlError's own message hides
 * the driver's ("UNIQUE constraint failed…", pg's "too many clients already"), which is in the cause.
 */
export const describeStoreFailure = (e: unknown): string => {
  if (!(e instanceof Error)) return String(e)
  const inner = (e as { cause?: unknown }).cause
  return inner instanceof Error ? `${e.message}: ${inner.message}` : e.message
}
