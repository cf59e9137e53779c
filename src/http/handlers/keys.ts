/** Handlers of the keys group: they check the caller and call KeyStore (after the ledger has caught up, where they read usage). */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { BadRequest, Forbidden, NotFound } from "../../domain/errors.js"
import { Principal, requireManagement } from "../../services/Auth.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { type KeyRow, KeyStore } from "../../services/KeyStore.js"
import { RateLimits } from "../../services/RateLimits.js"
import { intervalText } from "../../domain/keys.js"
import { Users } from "../../services/Users.js"
import { GatewayApi } from "../Api.js"
import { clipped } from "../../domain/validation.js"

/** `GET /v1/key`'s rate_limit: the shape the API family's SDK requires, `requests: -1` when none applies. */
const currentRateLimit = (key: KeyRow, rateLimits: RateLimits) => {
  const rule = rateLimits.ruleOf(key)
  if (rule === undefined) return { requests: -1, interval: "10s", note: "No request rate limit applies to this key." }
  const own = key.rate_limit_requests !== null
  return {
    requests: rule.requests,
    interval: intervalText(rule.intervalMs),
    note: own ? "The key's own rate limit." : "The workspace's default rate limit (rate_limits in the config).",
  }
}

const notFound = (hash: string) => new NotFound({ message: `API key ${clipped(hash)} not found` })

export const KeysLive = HttpApiBuilder.group(GatewayApi, "keys", (handlers) =>
  Effect.gen(function* () {
    const keys = yield* KeyStore
    const users = yield* Users
    const rateLimits = yield* RateLimits
    // Usage and credits are sums over the ledger: what it still has queued is written first.
    const caughtUp = (yield* GenerationStore).caughtUp
    const viewOne = (row: KeyRow) => Effect.zipRight(caughtUp, keys.viewOne(row))
    const viewMany = (rows: ReadonlyArray<KeyRow>) => Effect.zipRight(caughtUp, keys.viewMany(rows))
    const credits = (userId: string) => Effect.zipRight(caughtUp, keys.credits(userId))

    /**
     * A key the caller may manage: their own, or one in a workspace they administer. Admins govern
     * their members' keys: without that, a member (or an admin) keeping one active key could be
     * neither removed nor demoted, nor the workspace deleted. Any other key is 404.
     */
    const keyInReach = (hash: string) =>
      Effect.gen(function* () {
        const p = yield* requireManagement
        const found = yield* keys.findByHash(hash)
        if (Option.isNone(found)) return yield* notFound(hash)
        const row = found.value
        if (row.user_id === p.userId || (yield* users.roleIn(p.userId, row.workspace_id)) === "admin") return row
        return yield* notFound(hash)
      })

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const workspaceId = urlParams.workspace_id
          const role = workspaceId === undefined ? undefined : yield* users.roleIn(p.userId, workspaceId)
          if (workspaceId !== undefined && role === undefined) {
            return yield* new NotFound({ message: `Workspace ${clipped(workspaceId)} not found` })
          }
          // An admin listing a workspace sees every member's keys there (keyInReach below).
          const rows = yield* keys.list(p.userId, {
            offset: urlParams.offset ?? 0,
            includeDisabled: urlParams.include_disabled ?? false,
            ...(workspaceId === undefined ? {} : { workspaceId, everyUser: role === "admin" }),
          })
          return { data: yield* viewMany(rows) }
        }),
      )
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const workspaceId = payload.workspace_id ?? p.workspaceId
          if (payload.workspace_id !== undefined && !(yield* users.canUseWorkspace(p.userId, workspaceId))) {
            return yield* new NotFound({ message: `Workspace ${clipped(workspaceId)} not found` })
          }
          if (payload.expires_at != null && Date.parse(payload.expires_at) <= Date.now()) {
            return yield* new BadRequest({ message: "Invalid request: expires_at: must be in the future" })
          }
          const { row, secret } = yield* keys.create({
            userId: p.userId,
            workspaceId,
            name: payload.name,
            limit: payload.limit ?? null,
            limitReset: payload.limit_reset ?? null,
            includeByokInLimit: payload.include_byok_in_limit ?? false,
            expiresAt: payload.expires_at == null ? null : new Date(payload.expires_at).toISOString(),
            isManagement: payload.is_management_key ?? false,
            rateLimit: payload.rate_limit ?? null,
          })
          return { data: yield* viewOne(row), key: secret }
        }),
      )
      .handle("get", ({ path }) => Effect.flatMap(keyInReach(path.hash), (row) => Effect.map(viewOne(row), (data) => ({ data }))))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          const row = yield* keyInReach(path.hash)
          if (payload.disabled === false && !(yield* users.canUseWorkspace(row.user_id, row.workspace_id))) {
            return yield* new Forbidden({
              message: `The key's user is no longer a member of workspace ${row.workspace_id}; the key cannot be re-enabled`,
            })
          }
          // A new limit recounts its window from the ledger: the spend still queued is written first.
          if (payload.limit !== undefined || payload.limit_reset !== undefined) yield* caughtUp
          const updated = yield* keys.update(row.hash, {
            name: payload.name,
            disabled: payload.disabled,
            includeByokInLimit: payload.include_byok_in_limit,
            limit: payload.limit,
            limitReset: payload.limit_reset,
            rateLimit: payload.rate_limit,
          })
          return { data: yield* viewOne(updated) }
        }),
      )
      .handle("delete", ({ path }) =>
        Effect.gen(function* () {
          const row = yield* keyInReach(path.hash)
          yield* keys.remove(row.hash)
          return { deleted: true as const }
        }),
      )
      .handle("current", () =>
        Effect.gen(function* () {
          const p = yield* Principal
          const view = yield* viewOne(p.key)
          return {
            data: {
              label: view.label,
              limit: view.limit,
              limit_remaining: view.limit_remaining,
              limit_reset: view.limit_reset,
              include_byok_in_limit: view.include_byok_in_limit,
              usage: view.usage,
              usage_daily: view.usage_daily,
              usage_weekly: view.usage_weekly,
              usage_monthly: view.usage_monthly,
              byok_usage: view.byok_usage,
              byok_usage_daily: view.byok_usage_daily,
              byok_usage_weekly: view.byok_usage_weekly,
              byok_usage_monthly: view.byok_usage_monthly,
              is_management_key: p.isManagement,
              is_provisioning_key: p.isManagement,
              is_free_tier: false,
              creator_user_id: view.creator_user_id,
              workspace_id: view.workspace_id,
              expires_at: view.expires_at,
              rate_limit: currentRateLimit(p.key, rateLimits),
              allowed_data_regions: ["global"] as const,
              free_model_daily_requests: { limit: -1, remaining: -1, used: -1 },
              organization_id: null,
            },
          }
        }),
      )
      .handle("credits", () => Effect.flatMap(Principal, (p) => Effect.map(credits(p.userId), (data) => ({ data }))))
  }),
)

