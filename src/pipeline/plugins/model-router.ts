/**
 * The model-router stage: a request for `router/auto` or `router/pareto-code` (or their
 * `openrouter/` aliases) gets its concrete model here, before routing (the guardrails stage reads
 * the plan): the router's primary becomes `model` and its two fallbacks `models`, the plan's
 * strategy is `auto` / `pareto`, and the pipeline gains the router's entry. Any other model passes
 * untouched (one Set lookup). The request's `auto-router` / `pareto-router` plugin gives the settings.
 */
import { Either } from "effect"
import { NotFound } from "../../domain/errors.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import type { Router } from "../../routing/Router.js"
import type { Model } from "../../services/Catalog.js"
import { makeRouting, sessionIdOf } from "../routing.js"
import type { PreModelStage, StageState } from "../stages.js"
import { AUTO_MODELS, type AutoRouterConfig, chooseAuto, type Remembered } from "./auto-router.js"
import { choosePareto, PARETO_MODELS, type ParetoRouterConfig } from "./pareto-router.js"
import { NONE_ELIGIBLE, type RouterChoice } from "./router-common.js"

/** Sessions remembered for stickiness, at most (the oldest is forgotten first). */
const MAX_SESSIONS = 10_000

/** The request's entry of router plugin `id`, decoded by its Schema at ingress (plugins/index.ts). */
const configOf = <Config>(request: ResponsesRequest, id: "auto-router" | "pareto-router"): Config | undefined => {
  for (const p of request.plugins ?? []) if (p.id === id && p.enabled !== false) return p as unknown as Config
  return undefined
}

/** The catalog's chat models, kept per catalog list (the list is fixed for the catalog's life). */
const chatLists = new WeakMap<ReadonlyArray<Model>, ReadonlyArray<Model>>()
const chatModelsOf = (models: ReadonlyArray<Model>): ReadonlyArray<Model> => {
  let chat = chatLists.get(models)
  if (chat === undefined) {
    chat = models.filter((m) => m.kind === "chat")
    chatLists.set(models, chat)
  }
  return chat
}

export const makeModelRouterStage = (router: Pick<Router, "plan" | "catalog">): PreModelStage => {
  const routing = makeRouting(router as Router)
  const sessions = new Map<string, Remembered>()
  const remember = (key: string, value: Remembered) => {
    sessions.delete(key)
    sessions.set(key, value)
    if (sessions.size > MAX_SESSIONS) sessions.delete(sessions.keys().next().value as string)
  }
  return {
    name: "model-router",
    needsPlan: false,
    run: (state: StageState) => {
      const requested = state.request.model
      if (requested === undefined) return undefined
      const auto = AUTO_MODELS.has(requested)
      if (!auto && !PARETO_MODELS.has(requested)) return undefined
      const session = sessionIdOf(state.request, state.headers.get("x-session-id"))
      if (Either.isLeft(session)) return session.left
      const sessionKey = session.right === null ? undefined : `${state.principal.userId}\u0000${session.right}`
      // Chat models only: the embedding and rerank models answer on routes of their own.
      const models = chatModelsOf(router.catalog.models)
      let choice: RouterChoice | undefined
      if (auto) {
        const config: AutoRouterConfig | undefined = configOf<AutoRouterConfig>(state.request, "auto-router")
        const picked = chooseAuto(models, config, state.request, sessionKey === undefined ? undefined : sessions.get(sessionKey))
        if (picked !== undefined && sessionKey !== undefined) remember(sessionKey, { model: picked.models[0] as string, task: picked.task })
        choice = picked
      } else {
        const config: ParetoRouterConfig | undefined = configOf<ParetoRouterConfig>(state.request, "pareto-router")
        choice = choosePareto(models, config)
      }
      if (choice === undefined) return new NotFound({ message: NONE_ELIGIBLE })
      const request: ResponsesRequest = { ...state.request, model: choice.models[0], models: choice.models.slice(1) }
      const hints = { ...state.hints, preset: state.hints?.preset, requested }
      const routed = { ...state, request, hints, plan: undefined }
      const plan = routing.route(routed, session.right)
      if ("_tag" in plan) return plan
      return {
        request,
        hints,
        plan: { ...plan, strategy: auto ? "auto" : "pareto" },
        entry: { type: "router", name: auto ? "auto-router" : "pareto-router", summary: choice.summary, data: choice.data },
      }
    },
  }
}

/** Which router chose the request's model (for the generation record), from the model the caller named. */
export const routerOf = (requested: string | undefined): "auto" | "pareto" | null =>
  requested === undefined ? null : AUTO_MODELS.has(requested) ? "auto" : PARETO_MODELS.has(requested) ? "pareto" : null
