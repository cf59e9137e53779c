/**
 * GET /v1/models/{id}: one model of the catalog as the `openai` SDK's `models.retrieve` reads it,
 * or, when the request carries `anthropic-version`, as the Anthropic SDK's does (`ModelInfo`),
 * with a 404 in that format's envelope (docs/models.md). The id has a slash: the SDKs send it
 * encoded (`demo%2Fecho`), a hand-written URL plainly (`demo/echo`); both are served. Both answers
 * of every model are encoded once at start (answers.ts). Authenticated like the data plane
 * (`Authorization: Bearer` or `x-api-key`): any key may read it.
 */
import { Context, Effect, Either, Runtime } from "effect"
import { type ApiError, errorResponse, NotFound } from "../../domain/errors.js"
import { quote } from "../../domain/validation.js"
import { messagesFormat } from "../../formats/messages/index.js"
import { errorResponseIn } from "../../formats/format.js"
import { Auth, requestSecret } from "../../services/Auth.js"
import type { ModelAnswers } from "./answers.js"

const PREFIX = "/v1/models/"
const JSON_TYPE = { "content-type": "application/json" }

/** The model id of a request's path: the rest after `/v1/models/`, percent-decoded (undefined when it does not decode). */
export const modelIdOfPath = (pathname: string): string | undefined => {
  const rest = pathname.slice(PREFIX.length).replace(/\/$/, "")
  try {
    return decodeURIComponent(rest)
  } catch {
    return undefined
  }
}

export const makeModelRetrieveRoute = (runtime: Runtime.Runtime<Auth>, answers: ModelAnswers) => {
  const auth = Context.get(runtime.context, Auth)
  const run = Runtime.runPromise(runtime)

  return async (req: Request): Promise<Response> => {
    const anthropic = req.headers.has("anthropic-version")
    const refuse = (e: ApiError) => (anthropic ? errorResponseIn(messagesFormat, e) : errorResponse(e))
    const principal = await run(Effect.either(auth.authenticateSecret(requestSecret(req.headers))))
    if (Either.isLeft(principal)) return refuse(principal.left)
    const id = modelIdOfPath(new URL(req.url).pathname)
    const found = id === undefined ? undefined : answers.byId.get(id)
    if (found === undefined) {
      return refuse(new NotFound({ message: `Model ${quote(id ?? "")} does not exist in this gateway's catalog` }))
    }
    return new Response(anthropic ? found.anthropic : found.openai, { headers: JSON_TYPE })
  }
}
