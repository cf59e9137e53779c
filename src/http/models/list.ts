/**
 * GET /v1/models with `anthropic-version`: the list as the Anthropic SDK's `models.list` reads it,
 * `{data: [ModelInfo…], has_more, first_id, last_id}`, paged by `limit` (1 to 1000, default 20),
 * `after_id` and `before_id` (docs/models.md). Its models are those the catalog listing shows by
 * default, each `ModelInfo` encoded once at start (answers.ts). Authenticated like the data plane
 * (`x-api-key` or `Authorization: Bearer`), refusals in the Messages format's envelope. Without the
 * header the request is the control plane's listing (route-table.ts).
 */
import { Context, Effect, Either, Runtime } from "effect"
import { type ApiError, BadRequest } from "../../domain/errors.js"
import { AnthropicModelsParams } from "../../domain/models.js"
import { makeDecoder, quote } from "../../domain/validation.js"
import { errorResponseIn } from "../../formats/format.js"
import { messagesFormat } from "../../formats/messages/index.js"
import { Auth, requestSecret } from "../../services/Auth.js"
import type { ModelAnswer, ModelAnswers } from "./answers.js"

/** Anthropic's default page size. */
const DEFAULT_LIMIT = 20
const JSON_TYPE = { "content-type": "application/json" }

const decodeParams = makeDecoder(AnthropicModelsParams)
const refuse = (e: ApiError) => errorResponseIn(messagesFormat, e)

/** The page's body: the `ModelInfo`s are already JSON, so only the envelope is written here. */
const pageBody = (page: ReadonlyArray<ModelAnswer>, hasMore: boolean): string =>
  `{"data":[${page.map((a) => a.anthropic).join(",")}],"has_more":${hasMore},"first_id":${JSON.stringify(page[0]?.id ?? null)},"last_id":${JSON.stringify(page.at(-1)?.id ?? null)}}`

/**
 * The page of `listed` the query asks for: `limit` models after `after_id`, or the `limit` just
 * before `before_id` (both: between them, from `after_id` on). `has_more` looks in the direction of
 * travel, as the SDK's paging reads it (backwards when it sent `before_id`).
 */
const pageOf = (listed: ReadonlyArray<ModelAnswer>, indexOf: ReadonlyMap<string, number>, params: AnthropicModelsParams): Either.Either<string, BadRequest> => {
  const cursor = (field: "after_id" | "before_id"): Either.Either<number | undefined, BadRequest> => {
    const id = params[field]
    if (id === undefined) return Either.right(undefined)
    const at = indexOf.get(id)
    return at === undefined ? Either.left(new BadRequest({ message: `Invalid request: ${field}: ${quote(id)} is not a model of this gateway's list` })) : Either.right(at)
  }
  return Either.flatMap(Either.all([cursor("after_id"), cursor("before_id")]), ([after, before]) => {
    const limit = params.limit ?? DEFAULT_LIMIT
    const start = after === undefined ? 0 : after + 1
    const end = before ?? listed.length
    if (before !== undefined && after === undefined) {
      const from = Math.max(start, end - limit)
      return Either.right(pageBody(listed.slice(from, end), from > start))
    }
    return Either.right(pageBody(listed.slice(start, Math.min(end, start + limit)), start + limit < end))
  })
}

export const makeAnthropicModelListRoute = (runtime: Runtime.Runtime<Auth>, answers: ModelAnswers) => {
  const auth = Context.get(runtime.context, Auth)
  const run = Runtime.runPromise(runtime)
  const indexOf = new Map(answers.listed.map((a, i) => [a.id, i]))

  return async (req: Request): Promise<Response> => {
    const principal = await run(Effect.either(auth.authenticateSecret(requestSecret(req.headers))))
    if (Either.isLeft(principal)) return refuse(principal.left)
    const params = Either.flatMap(decodeParams(Object.fromEntries(new URL(req.url).searchParams)), (p) => pageOf(answers.listed, indexOf, p))
    return Either.isLeft(params) ? refuse(params.left) : new Response(params.right, { headers: JSON_TYPE })
  }
}
