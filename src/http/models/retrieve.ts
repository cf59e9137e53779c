/**
 * GET /v1/models/{id}: one model of the catalog as the `openai` SDK's `models.retrieve` reads it,
 * or, when the request carries `anthropic-version`, as the Anthropic SDK's does (`ModelInfo`),
 * with a 404 in that format's envelope (docs/models.md). The id has a slash: the SDKs send it
 * encoded (`demo%2Fecho`), a hand-written URL plainly (`demo/echo`); both are served. Both answers
 * of every model are encoded once at start. Authenticated like the data plane (`Authorization:
 * Bearer` or `x-api-key`): any key may read it.
 */
import { Context, Effect, Either, Runtime, Schema } from "effect"
import { type ApiError, errorResponse, NotFound } from "../../domain/errors.js"
import { AnthropicModelInfo, OpenAIModel } from "../../domain/models.js"
import { quote } from "../../domain/validation.js"
import { messagesFormat } from "../../formats/messages/index.js"
import { errorResponseIn } from "../../formats/format.js"
import { Auth, requestSecret } from "../../services/Auth.js"
import { Catalog, type Model } from "../../services/Catalog.js"

const PREFIX = "/v1/models/"
const JSON_TYPE = { "content-type": "application/json" }

/** An RFC 3339 time of a config date (`expiration_date`), or null when it does not read as one. */
const rfc3339 = (date: string | undefined): string | null => {
  if (date === undefined) return null
  const ms = Date.parse(date)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

const encodeOpenAI = Schema.encodeSync(OpenAIModel)
const encodeAnthropic = Schema.encodeSync(AnthropicModelInfo)

const answersOf = (model: Model) => {
  const created = model.entry.created ?? 0
  const maxTokens = model.endpoints.reduce<number | null>((most, e) => (e.maxOutputTokens === undefined ? most : Math.max(most ?? 0, e.maxOutputTokens)), null)
  return {
    openai: JSON.stringify(encodeOpenAI({ id: model.id, object: "model", created, owned_by: model.id.slice(0, model.id.indexOf("/")) })),
    anthropic: JSON.stringify(
      encodeAnthropic({
        type: "model",
        id: model.id,
        display_name: model.name,
        created_at: new Date(created * 1000).toISOString(),
        capabilities: null,
        lifecycle: "active",
        line: null,
        deprecated_at: null,
        retires_at: rfc3339(model.entry.expiration_date),
        max_input_tokens: model.contextLength,
        max_tokens: maxTokens,
      }),
    ),
  }
}

/** The model id of a request's path: the rest after `/v1/models/`, percent-decoded (undefined when it does not decode). */
export const modelIdOfPath = (pathname: string): string | undefined => {
  const rest = pathname.slice(PREFIX.length).replace(/\/$/, "")
  try {
    return decodeURIComponent(rest)
  } catch {
    return undefined
  }
}

export const makeModelRetrieveRoute = (runtime: Runtime.Runtime<Auth | Catalog>) => {
  const auth = Context.get(runtime.context, Auth)
  const catalog = Context.get(runtime.context, Catalog)
  const answers = new Map(catalog.models.map((m) => [m.id, answersOf(m)]))
  const run = Runtime.runPromise(runtime)

  return async (req: Request): Promise<Response> => {
    const anthropic = req.headers.has("anthropic-version")
    const refuse = (e: ApiError) => (anthropic ? errorResponseIn(messagesFormat, e) : errorResponse(e))
    const principal = await run(Effect.either(auth.authenticateSecret(requestSecret(req.headers))))
    if (Either.isLeft(principal)) return refuse(principal.left)
    const id = modelIdOfPath(new URL(req.url).pathname)
    const found = id === undefined ? undefined : answers.get(id)
    if (found === undefined) {
      return refuse(new NotFound({ message: `Model ${quote(id ?? "")} does not exist in this gateway's catalog` }))
    }
    return new Response(anthropic ? found.anthropic : found.openai, { headers: JSON_TYPE })
  }
}
