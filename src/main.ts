#!/usr/bin/env bun
/** Entry point: the CLI (`gateway serve` starts the server). Nothing imports this file. */
// Modules, not the packages' indexes: an index loads the whole package (~0.25 s of every command's start).
import * as ValidationError from "@effect/cli/ValidationError"
import * as BunContext from "@effect/platform-bun/BunContext"
import * as BunRuntime from "@effect/platform-bun/BunRuntime"
import { Cause, Effect, Runtime } from "effect"
import { CliError, runCli, usageOf } from "./cli.js"
import { describeStoreFailure, isStoreUnavailable } from "./store/unavailable.js"

const argv = process.argv.length <= 2 ? [...process.argv, "serve"] : process.argv

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
    if (isStoreUnavailable(failure)) return stop(`gateway: the database cannot be reached: ${describeStoreFailure(failure)}`, 1)
    // A usage error: @effect/cli has printed its one line; the command's usage follows, no Effect internals.
    if (ValidationError.isValidationError(failure)) return stop(usageOf(argv.slice(2)), 2)
    return Effect.failCause(cause)
  }),
  Effect.provide(BunContext.layer),
  BunRuntime.runMain({ disableErrorReporting: false }),
)
