/**
 * The wire shapes of `POST /v1/embeddings` (OpenAI's, with the API family's extra fields) and
 * `POST /v1/rerank` (Cohere's, as the API family serves it): request Schemas with the limits the
 * 400s quote, the checks a Schema cannot say (empty items, parts this gateway does not embed),
 * and the answers' Schemas (docs/embeddings.md).
 */
import { Either, Schema } from "effect"
import { BadRequest } from "./errors.js"
import { intAtLeast, maxChars, nonEmpty, oneOf, rule } from "./schema-rules.js"
import { makeDecoder } from "./validation.js"

/** Inputs of one embeddings request at most (OpenAI's limit). */
export const MAX_EMBEDDING_INPUTS = 2048
/** Documents of one rerank request at most (Cohere's limit). */
export const MAX_RERANK_DOCUMENTS = 1000

const TokenIds = Schema.Array(Schema.Int.pipe(Schema.nonNegative({ message: () => "token ids are integers ≥ 0" })))
const ContentPart = Schema.Struct({ type: Schema.String, text: Schema.optional(Schema.String) })
/** The API family's multimodal input: `{content: [{type: "text", text}, {type: "image_url", …}]}`. */
const MultimodalInput = Schema.Struct({ content: Schema.Array(ContentPart) })

const EmbeddingInputs = Schema.Union(
  Schema.String,
  Schema.Array(Schema.String),
  TokenIds,
  Schema.Array(TokenIds),
  Schema.Array(MultimodalInput),
).annotations(rule("a string, an array of strings, an array of token ids, an array of token id arrays, or an array of {content: [parts]}"))

/** `provider` and `models` route as on the model requests (decoded by that Schema, routes.ts). */
const routing = {
  models: Schema.optional(Schema.Array(nonEmpty)),
  provider: Schema.optional(Schema.Unknown),
  session_id: Schema.optional(maxChars(256)),
  user: Schema.optional(maxChars(256)),
  /** Refused (embeddingsRequestOf): broadcast destinations do not receive embedding calls on this gateway. */
  trace: Schema.optional(Schema.Unknown),
}

export const EmbeddingsRequest = Schema.Struct({
  model: nonEmpty,
  input: EmbeddingInputs,
  encoding_format: Schema.optional(oneOf("float", "base64")),
  dimensions: Schema.optional(intAtLeast(1)),
  input_type: Schema.optional(maxChars(64)),
  ...routing,
})
export type EmbeddingsRequest = typeof EmbeddingsRequest.Type

const RerankDocument = Schema.Union(Schema.String, Schema.Struct({ text: Schema.optional(Schema.String), image: Schema.optional(Schema.String) })).annotations(
  rule("a string or {text}"),
)

export const RerankRequest = Schema.Struct({
  model: nonEmpty,
  query: nonEmpty,
  documents: Schema.Array(RerankDocument).pipe(
    Schema.minItems(1, { message: () => "must have at least one document" }),
    Schema.maxItems(MAX_RERANK_DOCUMENTS, { message: () => `at most ${MAX_RERANK_DOCUMENTS} documents` }),
  ),
  top_n: Schema.optional(intAtLeast(1)),
  return_documents: Schema.optional(Schema.Boolean),
  ...routing,
})
export type RerankRequest = typeof RerankRequest.Type

const bad = (message: string) => Either.left(new BadRequest({ message: `Invalid request: ${message}` }))

const refusedExtras = (body: { readonly trace?: unknown }): BadRequest | undefined =>
  body.trace === undefined ? undefined : new BadRequest({ message: "Invalid request: trace: not supported on this endpoint (embedding and rerank calls are not sent to broadcast destinations)" })

/** One input as the upstream takes it: text, or token ids. */
export type EmbeddingInput = string | ReadonlyArray<number>

const decodeEmbeddings = makeDecoder(EmbeddingsRequest)

/** The body → the request and its inputs as a list, or the 400 naming the field and the rule. */
export const embeddingsRequestOf = (body: unknown): Either.Either<{ readonly request: EmbeddingsRequest; readonly inputs: ReadonlyArray<EmbeddingInput> }, BadRequest> =>
  Either.flatMap(decodeEmbeddings(body), (request) => {
    const extra = refusedExtras(request)
    if (extra !== undefined) return Either.left(extra)
    const input = request.input
    if (typeof input === "string") return input === "" ? bad("input: must not be empty") : Either.right({ request, inputs: [input] })
    if (input.length === 0) return bad("input: must have at least one item")
    if (typeof input[0] === "number") return Either.right({ request, inputs: [input as ReadonlyArray<number>] })
    if (input.length > MAX_EMBEDDING_INPUTS) return bad(`input: at most ${MAX_EMBEDDING_INPUTS} items`)
    const inputs: Array<EmbeddingInput> = []
    for (let i = 0; i < input.length; i++) {
      const item = input[i] as string | ReadonlyArray<number> | { readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }> }
      if (typeof item === "string" || Array.isArray(item)) {
        if (item.length === 0) return bad(`input[${i}]: must not be empty`)
        inputs.push(item as EmbeddingInput)
        continue
      }
      const parts = (item as { readonly content: ReadonlyArray<{ readonly type: string; readonly text?: string }> }).content
      let text = ""
      for (let j = 0; j < parts.length; j++) {
        const part = parts[j] as { readonly type: string; readonly text?: string }
        if (part.type !== "text") return bad(`input[${i}].content[${j}]: ${part.type} parts are not supported: this gateway embeds text only`)
        if (part.text === undefined) return bad(`input[${i}].content[${j}].text: is missing`)
        text += text === "" ? part.text : `\n${part.text}`
      }
      if (text === "") return bad(`input[${i}].content: must hold some text`)
      inputs.push(text)
    }
    return Either.right({ request, inputs })
  })

const decodeRerank = makeDecoder(RerankRequest)

/** The body → the request and its documents' texts, or the 400 naming the field and the rule. */
export const rerankRequestOf = (body: unknown): Either.Either<{ readonly request: RerankRequest; readonly documents: ReadonlyArray<string> }, BadRequest> =>
  Either.flatMap(decodeRerank(body), (request) => {
    const extra = refusedExtras(request)
    if (extra !== undefined) return Either.left(extra)
    const documents: Array<string> = []
    for (let i = 0; i < request.documents.length; i++) {
      const document = request.documents[i] as string | { readonly text?: string; readonly image?: string }
      if (typeof document === "string") {
        documents.push(document)
        continue
      }
      if (document.image !== undefined) return bad(`documents[${i}].image: image documents are not supported: this gateway reranks text only`)
      if (document.text === undefined) return bad(`documents[${i}].text: is missing`)
      documents.push(document.text)
    }
    return Either.right({ request, documents })
  })

// ------------------------------------------------------------------ answers

export const EmbeddingsUsage = Schema.Struct({ prompt_tokens: Schema.Int, total_tokens: Schema.Int, cost: Schema.Number })

export const EmbeddingsResponse = Schema.Struct({
  object: Schema.Literal("list"),
  data: Schema.Array(
    Schema.Struct({
      object: Schema.Literal("embedding"),
      index: Schema.Int,
      /** Floats, or base64 of their little-endian float32 bytes (`encoding_format: "base64"`). */
      embedding: Schema.Union(Schema.Array(Schema.Number), Schema.String),
    }),
  ),
  model: Schema.String,
  id: Schema.String,
  usage: EmbeddingsUsage,
})
export type EmbeddingsResponse = typeof EmbeddingsResponse.Type

export const RerankResponse = Schema.Struct({
  id: Schema.String,
  model: Schema.String,
  provider: Schema.String,
  results: Schema.Array(
    Schema.Struct({
      index: Schema.Int,
      relevance_score: Schema.Number,
      /** The document's text; `{}` with `return_documents: false` (the API family's SDK requires the key). */
      document: Schema.Struct({ text: Schema.optional(Schema.String) }),
    }),
  ),
  usage: Schema.Struct({ search_units: Schema.Int, total_tokens: Schema.optional(Schema.Int), cost: Schema.Number }),
})
export type RerankResponse = typeof RerankResponse.Type

/** Floats as base64 of their little-endian float32 bytes (what the openai SDK decodes by default). */
export const base64Float32 = (vector: ReadonlyArray<number>): string => {
  const bytes = new Uint8Array(vector.length * 4)
  const view = new DataView(bytes.buffer)
  for (let i = 0; i < vector.length; i++) view.setFloat32(i * 4, vector[i] as number, true)
  return Buffer.from(bytes).toString("base64")
}
