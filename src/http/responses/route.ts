/**
 * POST /v1/responses, the data plane: a native Bun route. It parses, asks the runtime once
 * for a decision, and streams. (Placeholder until the responses path lands: authenticates,
 * reads the body under the cap, then 501.)
 */
import { Effect, Either, type Runtime } from "effect"
import { BadRequest, errorResponse, NotImplemented } from "../../domain/errors.js"
import { Auth } from "../../services/Auth.js"
import { readCapped, tooLarge } from "../body.js"

export const makeResponsesRoute = (runtime: Runtime.Runtime<Auth>, maxBodyBytes: number) => {
  const authenticate = (req: Request) =>
    Effect.runPromise(
      Effect.either(
        Effect.provide(
          Effect.flatMap(Auth, (auth) => auth.authenticateHeader(req.headers.get("authorization"))),
          runtime.context,
        ),
      ),
    )
  return async (req: Request): Promise<Response> => {
    const declared = req.headers.get("content-length")
    if (declared !== null && Number(declared) > maxBodyBytes) return errorResponse(tooLarge(maxBodyBytes))
    const principal = await authenticate(req)
    if (Either.isLeft(principal)) return errorResponse(principal.left)
    const bytes = await readCapped(req, maxBodyBytes)
    if (!(bytes instanceof Uint8Array)) return errorResponse(bytes)
    try {
      JSON.parse(new TextDecoder().decode(bytes))
    } catch {
      return errorResponse(new BadRequest({ message: "Malformed JSON in the request body" }))
    }
    return errorResponse(new NotImplemented({ message: "POST /v1/responses is not implemented yet" }))
  }
}
