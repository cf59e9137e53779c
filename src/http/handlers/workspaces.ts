/** Handlers of the workspaces group: they check the caller and call WorkspaceStore (and KeyStore, for the keys a deleted workspace takes along), nothing more. */
import { HttpApiBuilder } from "@effect/platform"
import { Effect, Option } from "effect"
import { BadRequest, Forbidden, NotFound } from "../../domain/errors.js"
import { pageOf } from "../../domain/paging.js"
import { quote, clipped } from "../../domain/validation.js"
import type { UpdateWorkspacePayload } from "../../domain/workspaces.js"
import { servesModel } from "../../routing/model-id.js"
import { isServerToolName, SERVER_TOOL_NAMES } from "../../tools/index.js"
import { Broadcast } from "../../broadcast/Broadcast.js"
import { requireManagement } from "../../services/Auth.js"
import { Catalog } from "../../services/Catalog.js"
import { KeyStore } from "../../services/KeyStore.js"
import { ContentPolicy } from "../../services/ContentPolicy.js"
import { WorkspaceBudgets } from "../../services/WorkspaceBudgets.js"
import { WorkspaceStore, type WorkspaceSettings } from "../../services/WorkspaceStore.js"
import { GatewayApi } from "../Api.js"

const notFound = (ref: string) => new NotFound({ message: `Workspace ${clipped(ref)} not found` })

/** The wire's settings fields in the store's words. */
const settingsOf = (p: Omit<UpdateWorkspacePayload, "name" | "slug">): WorkspaceSettings => ({
  description: p.description,
  defaultTextModel: p.default_text_model,
  defaultImageModel: p.default_image_model,
  defaultProviderSort: p.default_provider_sort,
  ioLoggingApiKeyIds: p.io_logging_api_key_ids,
  ioLoggingSamplingRate: p.io_logging_sampling_rate,
  isDataDiscountLoggingEnabled: p.is_data_discount_logging_enabled,
  isObservabilityBroadcastEnabled: p.is_observability_broadcast_enabled,
  isObservabilityIoLoggingEnabled: p.is_observability_io_logging_enabled,
  disabledServerTools: p.disabled_server_tools,
})

export const WorkspacesLive = HttpApiBuilder.group(GatewayApi, "workspaces", (handlers) =>
  Effect.gen(function* () {
    const store = yield* WorkspaceStore
    const keys = yield* KeyStore
    const policy = yield* ContentPolicy
    const broadcast = yield* Broadcast
    const catalog = yield* Catalog
    const budgets = yield* WorkspaceBudgets
    const noBudget = (slug: string, interval: string) => new NotFound({ message: `Workspace '${slug}' has no ${interval} budget` })

    /** A default model the catalog does not serve would fail every request that names none: refused at write. */
    const checkDefaultModel = (model: string | null | undefined) =>
      model == null || servesModel(model, (id) => catalog.model(id) !== undefined)
        ? Effect.void
        : Effect.fail(
            new BadRequest({
              message: `Invalid request: default_text_model: ${quote(model)} is not a model of this gateway's catalog`,
            }),
          )

    /** A name that is no server tool turns nothing off: refused at write, so a typo is not a setting that does nothing. */
    const checkServerTools = (names: ReadonlyArray<string> | null | undefined) => {
      const at = names?.findIndex((name) => !isServerToolName(name)) ?? -1
      if (names == null || at < 0) return Effect.void
      return Effect.fail(
        new BadRequest({
          message: `Invalid request: disabled_server_tools[${at}]: ${quote(names[at])} is not a server tool (${SERVER_TOOL_NAMES}, each with or without openrouter:)`,
        }),
      )
    }

    /** A workspace the caller owns or is a member of; anything else does not exist for it. */
    const visible = (ref: string) =>
      Effect.gen(function* () {
        const p = yield* requireManagement
        const found = yield* store.findForUser(p.userId, ref)
        const ws = yield* Option.match(found, { onNone: () => Effect.fail(notFound(ref)), onSome: Effect.succeed })
        return { ...ws, userId: p.userId }
      })

    /** A visible workspace the caller administers (owner or admin member). */
    const administered = (ref: string) =>
      Effect.flatMap(visible(ref), (ws) =>
        ws.role === "admin"
          ? Effect.succeed(ws)
          : Effect.fail(
              new Forbidden({
                message: `Only admins of workspace '${ws.row.slug}' can change it or its members; your role is ${ws.role}`,
              }),
            ),
      )

    return handlers
      .handle("list", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const { rows, total } = yield* store.list(p.userId, { offset: urlParams.offset ?? 0, limit: urlParams.limit ?? 100 })
          return { data: rows.map(store.view), total_count: total }
        }),
      )
      .handle("create", ({ payload }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          yield* checkDefaultModel(payload.default_text_model)
          yield* checkServerTools(payload.disabled_server_tools)
          const row = yield* store.create(p.userId, { name: payload.name, slug: payload.slug, ...settingsOf(payload) })
          return { data: store.view(row) }
        }),
      )
      .handle("get", ({ path }) => Effect.map(visible(path.id), (ws) => ({ data: store.view(ws.row) })))
      .handle("update", ({ path, payload }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          yield* checkDefaultModel(payload.default_text_model)
          yield* checkServerTools(payload.disabled_server_tools)
          const row = yield* store.update(ws.userId, ws.row, { name: payload.name, slug: payload.slug, ...settingsOf(payload) })
          // The data plane caches logging settings; the next request must see the change.
          yield* policy.invalidate(row.id)
          yield* broadcast.invalidate(row.id)
          return { data: store.view(row) }
        }),
      )
      .handle("delete", ({ path }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          const deletedKeys = yield* store.remove(ws.row, ws.userId)
          // After the commit: a key deleted with the workspace must not live on in a cache.
          yield* Effect.forEach(deletedKeys, keys.invalidate, { discard: true })
          return { deleted: true as const }
        }),
      )
      .handle("listMembers", ({ path, urlParams }) =>
        Effect.gen(function* () {
          const ws = yield* visible(path.id)
          return pageOf((yield* store.members(ws.row.id)).map(store.memberView), urlParams)
        }),
      )
      .handle("addMembers", ({ path, payload }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          const { added, members } = yield* store.addMembers(ws.row.id, payload.user_ids, { role: payload.role })
          return { added_count: added, data: members.map(store.memberView) }
        }),
      )
      .handle("removeMembers", ({ path, payload }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          return { removed_count: yield* store.removeMembers(ws.row, payload.user_ids) }
        }),
      )
      // Budgets: members read them, admins set and remove them (docs/api.md, "Workspace budgets").
      .handle("listBudgets", ({ path }) => Effect.flatMap(visible(path.id), (ws) => budgets.list(ws.row.id)))
      .handle("getBudget", ({ path }) =>
        Effect.gen(function* () {
          const ws = yield* visible(path.id)
          const found = yield* budgets.get(ws.row.id, path.interval)
          return yield* Option.match(found, { onNone: () => Effect.fail(noBudget(ws.row.slug, path.interval)), onSome: Effect.succeed })
        }),
      )
      .handle("setBudget", ({ path, payload }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          return yield* budgets.put(ws.row.id, path.interval, payload.limit_usd, payload.include_byok_in_budgets)
        }),
      )
      .handle("deleteBudget", ({ path }) =>
        Effect.gen(function* () {
          const ws = yield* administered(path.id)
          if (!(yield* budgets.remove(ws.row.id, path.interval))) return yield* noBudget(ws.row.slug, path.interval)
          return { deleted: true as const }
        }),
      )
  }),
)
