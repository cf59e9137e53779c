/**
 * POST /v1/responses, the data plane: a native Bun route. It parses, asks the runtime once
 * for a decision, and streams. (Placeholder until the responses path lands: authenticates, 501.)
 */
import { Effect, Either, type Runtime } from "effect"
import { errorResponse, NotImplemented } from "../../domain/errors.js"
import { Auth } from "../../services/Auth.js"

export const makeResponsesRoute = (runtime: Runtime.Runtime<Auth>) => {
  const run = (req: Request) =>
    Effect.gen(function* () {
      const auth = yield* Auth
      yield* auth.authenticateHeader(req.headers.get("authorization"))
      return yield* new NotImplemented({ message: "POST /v1/responses is not implemented yet" })
    })
  return async (req: Request): Promise<Response> => {
    const result = await Effect.runPromise(Effect.either(Effect.provide(run(req), runtime.context)))
    return Either.isLeft(result) ? errorResponse(result.left) : new Response(null, { status: 204 })
  }
}
