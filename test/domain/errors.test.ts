/** One table of caller-visible errors: the union, the tags, the wire map and the API's list derive from it. */
import { describe, expect, test } from "bun:test"
import { HttpApiSchema, OpenApi } from "@effect/platform"
import { Either, Schema } from "effect"
import { AnyApiError, apiErrorClasses, envelopeOf, Errors, isApiError } from "../../src/domain/errors.js"
import { GatewayApi } from "../../src/http/Api.js"

const EXPECTED: Record<string, number> = {
  BadRequest: 400,
  Unauthorized: 401,
  PaymentRequired: 402,
  Forbidden: 403,
  NotFound: 404,
  MethodNotAllowed: 405,
  RequestTimeout: 408,
  Conflict: 409,
  PayloadTooLarge: 413,
  UnsupportedMediaType: 415,
  Unprocessable: 422,
  RateLimited: 429,
  InternalError: 500,
  NotImplemented: 501,
  BadGateway: 502,
  ServiceUnavailable: 503,
  UpstreamTimeout: 524,
  Overloaded: 529,
}

describe("the error table", () => {
  test("every caller-visible error is in it once, with its status", () => {
    const rows = apiErrorClasses.map((C) => [C._tag, new C({ message: "m" }).status as number] as const)
    expect(Object.fromEntries(rows)).toEqual(EXPECTED)
    expect(new Set(rows.map(([tag]) => tag)).size).toBe(rows.length)
  })

  test("the wire map has each error, annotated with the class's status, and encodes to the envelope", () => {
    expect(Object.keys(Errors).sort()).toEqual(Object.keys(EXPECTED).sort())
    for (const C of apiErrorClasses) {
      const wire = Errors[C._tag] as Schema.Schema<unknown, unknown>
      expect(HttpApiSchema.getStatus(wire.ast, 0)).toBe(EXPECTED[C._tag] as number)
      const e = new C({ message: "why" })
      expect(Schema.encodeSync(wire)(e)).toEqual(envelopeOf(e))
    }
  })

  test("the union decodes any envelope to the class of its status", () => {
    const decoded = Schema.decodeUnknownEither(AnyApiError)({ error: { code: 404, message: "gone" }, user_id: null })
    expect(Either.isRight(decoded)).toBe(true)
  })

  test("isApiError knows each error and nothing else", () => {
    for (const C of apiErrorClasses) expect(isApiError(new C({ message: "m" }))).toBe(true)
    expect(isApiError({ _tag: "SqlError", status: 500 })).toBe(false)
    expect(isApiError(new Error("x"))).toBe(false)
  })

  test("the OpenAPI document declares every status of the table", () => {
    const doc = JSON.stringify(OpenApi.fromApi(GatewayApi))
    for (const status of Object.values(EXPECTED)) expect(doc).toContain(`"${status}"`)
  })
})
