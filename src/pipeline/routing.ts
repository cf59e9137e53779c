/**
 * Routing: the request as the stages left it → the route plan (the endpoints to try, in order),
 * with the workspace's defaults and the session key for sticky routing (Router.ts decides).
 */
import { Effect, Either } from "effect"
import { type ApiError, BadRequest } from "../domain/errors.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import { sessionScopeOf } from "../routing/sticky.js"
import { Missing, type StageState } from "./stages.js"

/** The body's session_id wins over the x-session-id header (contract rule 2). */
export const sessionIdOf = (request: ResponsesRequest, header: string | null): Either.Either<string | null, BadRequest> => {
  if (request.session_id !== undefined) return Either.right(request.session_id)
  if (header === null || header === "") return Either.right(null)
  if (header.length > 256) {
    return Either.left(new BadRequest({ message: "Invalid request: x-session-id: at most 256 characters" }))
  }
  return Either.right(header)
}

export const makeRouting = (router: Router) => {
  /**
   * Routes `state.request` into `state.plan`, or the refusal (no such model, no endpoint left), or
   * `Missing` when the processes share sticky sessions and this session's were not read yet.
   */
  const route = (state: StageState, sessionId: string | null): RoutePlan | ApiError | Missing => {
    const { request, hints, settings } = state
    const sessionKey = sessionId ?? request.prompt_cache_key ?? null
    // One check for a request without a session; with one, a read of the other processes' choice first.
    if (sessionKey !== null && sessionKey !== "") {
      const shared = router.sharing()
      if (shared !== undefined) {
        const scope = sessionScopeOf(state.principal.userId, sessionKey)
        if (state.loaded.stickyFetched !== scope) {
          return new Missing(
            Effect.promise(() =>
              shared.fetchSticky(scope).then(() => {
                state.loaded.stickyFetched = scope
              }),
            ),
          )
        }
      }
    }
    const plan = router.plan({
      request,
      defaultModel: settings.defaultTextModel,
      defaultSort: settings.defaultProviderSort,
      userId: state.principal.userId,
      sessionKey,
      preset: hints?.preset,
      requested: hints?.requested,
      fromPreset: hints?.fromPreset,
    })
    if (Either.isLeft(plan)) return plan.left
    state.plan = plan.right
    return plan.right
  }
  return { route } as const
}
