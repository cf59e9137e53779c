/**
 * Each model of the catalog as the clients' model endpoints answer it, encoded once at start and
 * shared by GET /v1/models/{id} (retrieve.ts) and the Anthropic list of GET /v1/models (list.ts):
 * the `openai` SDK's `Model` and the Anthropic SDK's `ModelInfo` (docs/models.md).
 */
import { Schema } from "effect"
import { AnthropicModelInfo, OpenAIModel, vendorOf } from "../../domain/models.js"
import type { CatalogShape, Model } from "../../services/Catalog.js"
import { outputModalitiesOf } from "../../services/ModelDirectory.js"

/** One model's answers, as JSON text. */
export interface ModelAnswer {
  readonly id: string
  readonly openai: string
  readonly anthropic: string
}

export interface ModelAnswers {
  /** Every model of the catalog, by id. */
  readonly byId: ReadonlyMap<string, ModelAnswer>
  /** The models a listing shows by default (the text ones, as GET /v1/models), in catalog order. */
  readonly listed: ReadonlyArray<ModelAnswer>
}

/** An RFC 3339 time of a config date (`expiration_date`), or null when it does not read as one. */
const rfc3339 = (date: string | undefined): string | null => {
  if (date === undefined) return null
  const ms = Date.parse(date)
  return Number.isNaN(ms) ? null : new Date(ms).toISOString()
}

const encodeOpenAI = Schema.encodeSync(OpenAIModel)
const encodeAnthropic = Schema.encodeSync(AnthropicModelInfo)

const answerOf = (model: Model): ModelAnswer => {
  const created = model.entry.created ?? 0
  const maxTokens = model.endpoints.reduce<number | null>((most, e) => (e.maxOutputTokens === undefined ? most : Math.max(most ?? 0, e.maxOutputTokens)), null)
  return {
    id: model.id,
    openai: JSON.stringify(encodeOpenAI({ id: model.id, object: "model", created, owned_by: vendorOf(model.id) })),
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

export const makeModelAnswers = (catalog: CatalogShape): ModelAnswers => {
  const answers = catalog.models.map((m) => ({ model: m, answer: answerOf(m) }))
  return {
    byId: new Map(answers.map(({ answer }) => [answer.id, answer])),
    listed: answers.filter(({ model }) => outputModalitiesOf(model).includes("text")).map(({ answer }) => answer),
  }
}
