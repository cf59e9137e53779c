/**
 * Handlers of the generations group. Who may read what: a management key reads the
 * generations of every workspace its user can use; an inference key reads only the
 * generations made with itself (`GET /generation`); content is for management keys only.
 * Anything else is 404, so existence does not leak. Feedback: any key that may read the generation.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { NotFound } from "../../domain/errors.js"
import { contentView, generationIdOf, generationView, type StoredGeneration } from "../../domain/generations.js"
import { Principal, type PrincipalShape, requireManagement } from "../../services/Auth.js"
import { GenerationFeedback } from "../../services/GenerationFeedback.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { Users } from "../../services/Users.js"
import { GatewayApi } from "../Api.js"
import { clipped } from "../../domain/validation.js"

const notFound = (id: string) => new NotFound({ message: `Generation ${clipped(id)} not found` })

export const GenerationsLive = HttpApiBuilder.group(GatewayApi, "generations", (handlers) =>
  Effect.gen(function* () {
    const generations = yield* GenerationStore
    const users = yield* Users
    const feedback = yield* GenerationFeedback

    const mayRead = (p: PrincipalShape, g: StoredGeneration) =>
      p.isManagement ? users.canUseWorkspace(p.userId, g.workspaceId) : Effect.succeed(g.keyHash === p.hash)

    const visible = (p: PrincipalShape, id: string) =>
      Effect.gen(function* () {
        yield* generations.written(id)
        const found = yield* generations.get(id)
        if (Option.isNone(found) || !(yield* mayRead(p, found.value))) return yield* notFound(id)
        return found.value
      })

    return handlers
      .handle("get", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* Principal
          return { data: generationView(yield* visible(p, urlParams.id)) }
        }),
      )
      .handle("content", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const generation = yield* visible(p, yield* generationIdOf(urlParams))
          const content = yield* generations.getContent(generation.id)
          if (Option.isNone(content)) {
            return yield* new NotFound({
              message: `Content of generation ${generation.id} is not stored (its workspace does not log prompts and completions, or it was older than retention.content_days)`,
            })
          }
          return { data: contentView(content.value, generation.error) }
        }),
      )
      // Any key that may read the generation may give feedback on it.
      .handle("feedback", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* Principal
          const generation = yield* visible(p, payload.generation_id)
          yield* feedback.submit({ generationId: generation.id, userId: p.userId, keyHash: p.hash, category: payload.category, comment: payload.comment })
          return { data: { success: true as const } }
        }),
      )
  }),
)
