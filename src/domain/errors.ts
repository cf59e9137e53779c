/**
 * Errors a caller can see. Each class carries its HTTP status; `envelopeOf` is the one
 * function that turns any of them into the spec's error envelope, on both planes.
 */
// The module, not the package's index: the index loads all of @effect/platform (~0.3 s), and this file is
// imported by the delivery and page Workers, which need none of it.
import * as HttpApiSchema from "@effect/platform/HttpApiSchema"
import { Schema } from "effect"

const Metadata = Schema.Record({ key: Schema.String, value: Schema.Unknown })

const fields = {
  message: Schema.String,
  metadata: Schema.optional(Metadata),
  /** Routing context, present on some 4xx/5xx of POST /responses when metadata is enabled. */
  service_metadata: Schema.optional(Schema.NullOr(Metadata)),
  /** The same, under the official SDK's name, when it was asked for with the SDK's header. */
  openrouter_metadata: Schema.optional(Schema.NullOr(Metadata)),
}

/** The envelope every error response uses: `{error: {code, message, metadata?}, user_id}`. */
export const ErrorEnvelope = Schema.Struct({
  error: Schema.Struct({
    code: Schema.Int,
    message: Schema.String,
    metadata: Schema.optional(Metadata),
  }),
  service_metadata: Schema.optional(Schema.NullOr(Metadata)),
  openrouter_metadata: Schema.optional(Schema.NullOr(Metadata)),
  user_id: Schema.NullOr(Schema.String),
})
export type ErrorEnvelope = typeof ErrorEnvelope.Type

export class BadRequest extends Schema.TaggedError<BadRequest>()("BadRequest", fields) {
  readonly status = 400
}
export class Unauthorized extends Schema.TaggedError<Unauthorized>()("Unauthorized", fields) {
  readonly status = 401
}
export class PaymentRequired extends Schema.TaggedError<PaymentRequired>()("PaymentRequired", fields) {
  readonly status = 402
}
export class Forbidden extends Schema.TaggedError<Forbidden>()("Forbidden", fields) {
  readonly status = 403
}
export class NotFound extends Schema.TaggedError<NotFound>()("NotFound", fields) {
  readonly status = 404
}
export class MethodNotAllowed extends Schema.TaggedError<MethodNotAllowed>()("MethodNotAllowed", fields) {
  readonly status = 405
}
export class RequestTimeout extends Schema.TaggedError<RequestTimeout>()("RequestTimeout", fields) {
  readonly status = 408
}
export class Conflict extends Schema.TaggedError<Conflict>()("Conflict", fields) {
  readonly status = 409
}
export class PayloadTooLarge extends Schema.TaggedError<PayloadTooLarge>()("PayloadTooLarge", fields) {
  readonly status = 413
}
export class UnsupportedMediaType extends Schema.TaggedError<UnsupportedMediaType>()("UnsupportedMediaType", fields) {
  readonly status = 415
}
export class Unprocessable extends Schema.TaggedError<Unprocessable>()("Unprocessable", fields) {
  readonly status = 422
}
export class RateLimited extends Schema.TaggedError<RateLimited>()("RateLimited", {
  ...fields,
  retry_after: Schema.optional(Schema.Number),
}) {
  readonly status = 429
}
export class InternalError extends Schema.TaggedError<InternalError>()("InternalError", fields) {
  readonly status = 500
}
export class NotImplemented extends Schema.TaggedError<NotImplemented>()("NotImplemented", fields) {
  readonly status = 501
}
export class BadGateway extends Schema.TaggedError<BadGateway>()("BadGateway", fields) {
  readonly status = 502
}
export class ServiceUnavailable extends Schema.TaggedError<ServiceUnavailable>()("ServiceUnavailable", {
  ...fields,
  retry_after: Schema.optional(Schema.Number),
}) {
  readonly status = 503
}
export class UpstreamTimeout extends Schema.TaggedError<UpstreamTimeout>()("UpstreamTimeout", fields) {
  readonly status = 524
}
export class Overloaded extends Schema.TaggedError<Overloaded>()("Overloaded", fields) {
  readonly status = 529
}

/**
 * The table of caller-visible errors: every class once. The union, the tag set, the wire map
 * (`Errors`) and the HttpApi's error list (`AnyApiError`) derive from it; a class's status is
 * its own (`readonly status`).
 */
export const apiErrorClasses = [
  BadRequest,
  Unauthorized,
  PaymentRequired,
  Forbidden,
  NotFound,
  MethodNotAllowed,
  RequestTimeout,
  Conflict,
  PayloadTooLarge,
  UnsupportedMediaType,
  Unprocessable,
  RateLimited,
  InternalError,
  NotImplemented,
  BadGateway,
  ServiceUnavailable,
  UpstreamTimeout,
  Overloaded,
] as const

type ApiErrorClass = (typeof apiErrorClasses)[number]
export type ApiError = InstanceType<ApiErrorClass>
export type ApiErrorTag = ApiError["_tag"]

const API_ERROR_TAGS: ReadonlySet<string> = new Set(apiErrorClasses.map((C) => C._tag))

/** Whether `u` is one of the table's errors (a value that crossed a boundary as `unknown`). */
export const isApiError = (u: unknown): u is ApiError =>
  typeof u === "object" && u !== null && "_tag" in u && API_ERROR_TAGS.has(String(u._tag)) && "status" in u

export const envelopeOf = (e: ApiError): ErrorEnvelope => ({
  error: e.metadata === undefined
    ? { code: e.status, message: e.message }
    : { code: e.status, message: e.message, metadata: e.metadata },
  ...(e.service_metadata !== undefined ? { service_metadata: e.service_metadata } : {}),
  ...(e.openrouter_metadata !== undefined ? { openrouter_metadata: e.openrouter_metadata } : {}),
  user_id: null,
})

/** Headers that go with an error: `Retry-After` on 429 and 503. */
export const errorHeaders = (e: ApiError): Record<string, string> => {
  if (e._tag === "RateLimited" || e._tag === "ServiceUnavailable") {
    return { "retry-after": String(Math.max(1, Math.ceil(e.retry_after ?? 1))) }
  }
  return {}
}

/** A web Response carrying the envelope; used by the data plane and the server's front door. */
export const errorResponse = (e: ApiError): Response =>
  new Response(JSON.stringify(envelopeOf(e)), {
    status: e.status,
    headers: { "content-type": "application/json", ...errorHeaders(e) },
  })

interface ErrorArgs {
  readonly message: string
  readonly metadata?: Record<string, unknown>
  readonly service_metadata?: Record<string, unknown> | null
  readonly openrouter_metadata?: Record<string, unknown> | null
}

/** The wire schema of one error: the envelope on the wire, the class in code, its status annotated. */
export type ErrorWire<E> = Schema.Schema<E, typeof ErrorEnvelope.Encoded>

/**
 * The HttpApi wire schema of an error class: decodes from and encodes to the envelope,
 * annotated with the class's status (read from an instance: the status is written once, on the class).
 */
const wire = <E extends ApiError>(Class: Schema.Schema<E, never> & (new (args: ErrorArgs) => E)): ErrorWire<E> =>
  Schema.transform(ErrorEnvelope, Schema.typeSchema(Class), {
    strict: true,
    decode: (env) =>
      new Class({
        message: env.error.message,
        ...(env.error.metadata ? { metadata: env.error.metadata } : {}),
        ...(env.service_metadata !== undefined ? { service_metadata: env.service_metadata } : {}),
        ...(env.openrouter_metadata !== undefined ? { openrouter_metadata: env.openrouter_metadata } : {}),
      }),
    encode: (e) => envelopeOf(e),
  }).annotations(HttpApiSchema.annotations({ status: new Class({ message: "" }).status }))

/** Each error's wire schema by tag, for `HttpApiEndpoint.addError` / `HttpApiGroup.addError`. */
export const Errors = Object.fromEntries(
  apiErrorClasses.map((Class) => [Class._tag, wire(Class as unknown as Schema.Schema<ApiError, never> & (new (args: ErrorArgs) => ApiError))]),
) as { readonly [C in ApiErrorClass as C["_tag"]]: ErrorWire<InstanceType<C>> }

/** Every error of the table as one schema: the API declares it once, so any of them encodes to the envelope. */
export const AnyApiError: ErrorWire<ApiError> = Schema.Union(...Object.values(Errors))
