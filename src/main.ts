#!/usr/bin/env bun
/** Entry point: the CLI (`gateway serve` starts the server). Nothing imports this file. */
// Modules, not the packages' indexes: an index loads the whole package (~0.25 s of every command's start).
import * as ValidationError from "@effect/cli/ValidationError"
import * as BunContext from "@effect/platform-bun/BunContext"
import * as BunRuntime from "@effect/platform-bun/BunRuntime"
import { Cause, Effect, Runtime } from "effect"
import { CliError, runCli, usageOf } from "./cli.js"
import { describeStoreFailure, isStoreUnavailable, storeFailureIn } from "./store/unavailable.js"

const argv = process.argv.length <= 2 ? [...process.argv, "serve"] : process.argv

/** DATABASE_URL as a line may show it: a URL's password masked; unset, the default file. */
const databaseNamed = (): string => {
  const url = process.env["DATABASE_URL"]
  if (url === undefined || url === "") return "DATABASE_URL unset: the SQLite file in GATEWAY_DATA_DIR"
  try {
    const parsed = new URL(url)
    if (parsed.password !== "") parsed.password = "****"
    return `DATABASE_URL ${parsed.protocol.startsWith("postgres") ? parsed.toString() : url}`
  } catch {
    return url.includes("@") ? "DATABASE_URL (not shown: it is no URL, and may hold a password)" : `DATABASE_URL ${url}`
  }
}

/** Ends the command with one line on stderr and `code`, no stack trace. */
const stop = (line: string, code: number) =>
  Effect.sync(() => {
    console.error(line)
    process.exit(code)
  })

runCli(argv).pipe(
  // A bad config or environment stops start-up with one line, no stack trace.
  Effect.catchAllCause((cause) => {
    const squashed = Cause.squash(cause)
    // startServer runs its own runtime; its failures arrive wrapped in a FiberFailure.
    const failure = Runtime.isFiberFailure(squashed) ? Cause.squash(squashed[Runtime.FiberFailureCauseId]) : squashed
    if (typeof failure === "object" && failure !== null && "_tag" in failure && failure._tag === "ConfigFileError") {
      return stop(`gateway: configuration error: ${(failure as unknown as { message: string }).message}`, 1)
    }
    if (failure instanceof CliError) return stop(`gateway: ${failure.message}`, 1)
    // A database that cannot be reached (down, refusing connections, out of them).
    if (isStoreUnavailable(failure)) return stop(`gateway: the database cannot be reached (${databaseNamed()}): ${describeStoreFailure(failure)}`, 1)
    // Any other failure of the store at start (a missing database or role, a file that is no
    // database, a migration another process ran at the same moment): its reason, not a trace.
    const store = storeFailureIn(failure)
    if (store !== undefined) return stop(`gateway: the database failed at start (${databaseNamed()}): ${describeStoreFailure(store)}`, 1)
    // A usage error: @effect/cli has printed its one line; the command's usage follows, no Effect internals.
    if (ValidationError.isValidationError(failure)) return stop(usageOf(argv.slice(2)), 2)
    return Effect.failCause(cause)
  }),
  Effect.provide(BunContext.layer),
  BunRuntime.runMain({ disableErrorReporting: false }),
)
