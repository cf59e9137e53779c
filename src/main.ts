#!/usr/bin/env bun
/** Entry point: the CLI (`gateway serve` starts the server). Nothing imports this file. */
import { BunContext, BunRuntime } from "@effect/platform-bun"
import { Cause, Effect, Runtime } from "effect"
import { runCli } from "./cli.js"

const argv = process.argv.length <= 2 ? [...process.argv, "serve"] : process.argv

runCli(argv).pipe(
  // A bad config or environment stops start-up with one line, no stack trace.
  Effect.catchAllCause((cause) => {
    const squashed = Cause.squash(cause)
    // startServer runs its own runtime; its failures arrive wrapped in a FiberFailure.
    const failure = Runtime.isFiberFailure(squashed) ? Cause.squash(squashed[Runtime.FiberFailureCauseId]) : squashed
    if (typeof failure === "object" && failure !== null && "_tag" in failure && failure._tag === "ConfigFileError") {
      return Effect.sync(() => {
        console.error(`gateway: configuration error: ${(failure as unknown as { message: string }).message}`)
        process.exit(1)
      })
    }
    if (typeof failure === "object" && failure !== null && "_tag" in failure && failure._tag === "ValidationError") {
      return Effect.sync(() => process.exit(2))
    }
    return Effect.failCause(cause)
  }),
  Effect.provide(BunContext.layer),
  BunRuntime.runMain({ disableErrorReporting: false }),
)
