/**
 * The guardrails stage (contract rule 7): a workspace's guardrail that matches the request's text
 * blocks it with 403, its patterns and, with metadata enabled, its pipeline entry. It reads the
 * plan (the candidates go in the block's metadata), and runs before any spend is held.
 */
import type { GuardrailsShape } from "../services/Guardrails.js"
import type { PreModelStage } from "./stages.js"

export const makeGuardrailsStage = (guardrails: GuardrailsShape): PreModelStage => ({
  name: "guardrails",
  needsPlan: true,
  run: (state) => {
    const plan = state.plan
    if (plan === undefined) return undefined
    return guardrails.blocked({
      request: state.request,
      workspaceId: state.principal.workspaceId,
      requested: plan.requested,
      strategy: plan.strategy,
      candidates: plan.candidates,
      withMetadata: state.withMetadata,
      metadataAlias: state.metadataAlias,
    })
  },
})
