/**
 * Every failure that reaches the edge becomes the spec's envelope: framework decode errors
 * become 400 naming the field, unreadable JSON becomes 400, anything unexpected becomes a
 * generic 500 (the detail goes to the log, never to the caller); the database unreachable is a 503
 * with `Retry-After`.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Cause, Effect } from "effect"
import { type ApiError, BadRequest, InternalError, isApiError, NotFound, PayloadTooLarge, ServiceUnavailable } from "../domain/errors.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { describeIssue } from "../domain/validation.js"
import { GatewayApi } from "./Api.js"



interface DecodeIssue {
  readonly _tag: string
  readonly path: ReadonlyArray<PropertyKey>
  readonly message: string
}

/** A message naming the field and the rule from HttpApi's decode error (the same words as the data plane's). */
const fromDecodeError = (issues: ReadonlyArray<DecodeIssue>): BadRequest => {
  const first = issues[0]
  return new BadRequest({ message: first === undefined ? "Invalid request" : `Invalid request: ${describeIssue(first)}` })
}

/** Maps any failure or defect to an ApiError; logs what the caller must not see. */
export const toApiError = (cause: Cause.Cause<unknown>): Effect.Effect<ApiError> => {
  const e = Cause.squash(cause)
  if (isApiError(e)) return Effect.succeed(e)
  if (typeof e === "object" && e !== null && "_tag" in e) {
    switch (e._tag) {
      case "HttpApiDecodeError":
        return Effect.succeed(fromDecodeError((e as unknown as { issues: ReadonlyArray<DecodeIssue> }).issues))
      case "RequestError": {
        const reason = (e as unknown as { reason: string }).reason
        if (reason === "Decode") return Effect.succeed(new BadRequest({ message: "Malformed JSON in the request body" }))
        break
      }
      case "RouteNotFound":
        return Effect.succeed(new NotFound({ message: "No such endpoint" }))
    }
  }
  // The database unreachable (docs/operations.md, "When the database goes away"): the contract's 503, not a 500.
  if (isStoreUnavailable(e)) {
    return Effect.succeed(new ServiceUnavailable({ message: "The gateway's database is unreachable; try again shortly", retry_after: 5 }))
  }
  if (e instanceof RangeError && /body/i.test(e.message)) {
    return Effect.succeed(new PayloadTooLarge({ message: "Request body is too large" }))
  }
  return Effect.as(
    Effect.logError("Unexpected failure", Cause.pretty(cause)),
    new InternalError({ message: "Internal server error" }),
  )
}

/** The control plane's last middleware: whatever failed leaves as an encodable ApiError. */
export const ErrorMappingLive = HttpApiBuilder.middleware(GatewayApi, (app) =>
  Effect.catchAllCause(app, (cause) =>
    Cause.isInterruptedOnly(cause) ? Effect.failCause(cause) : Effect.flatMap(toApiError(cause), Effect.fail),
  ),
)
