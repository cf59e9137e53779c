/**
 * Handlers of the activity group. Scope: a management key reads the workspaces its user may use
 * (one of them with `workspace_id`, or one key of them with `api_key_hash`; another is 404, so
 * existence does not leak); an inference key
 * reads only its own usage and log, and naming another key is 403. The ledger's queue is written
 * first, so a request answered a moment ago is counted.
 */
import { HttpApiBuilder } from "@effect/platform"
import { Effect } from "effect"
import { SUMMARY_MAX_DAYS } from "../../domain/activity.js"
import { generationView } from "../../domain/generations.js"
import { BadRequest, Forbidden, NotFound } from "../../domain/errors.js"
import { Activity, daysBetween, type UsageScope } from "../../services/Activity.js"
import { Principal, type PrincipalShape, requireManagement } from "../../services/Auth.js"
import { GenerationStore } from "../../services/GenerationStore.js"
import { KeyStore } from "../../services/KeyStore.js"
import { GatewayApi } from "../Api.js"
import { clipped } from "../../domain/validation.js"

const DAY_MS = 86_400_000
const dayAt = (ms: number) => new Date(ms).toISOString().slice(0, 10)

/** The last 30 completed UTC days: yesterday and the 29 before it. */
export const activityWindow = (nowMs: number) => ({ from: dayAt(nowMs - 30 * DAY_MS), to: dayAt(nowMs - DAY_MS) })

export const ActivityLive = HttpApiBuilder.group(GatewayApi, "activity", (handlers) =>
  Effect.gen(function* () {
    const activity = yield* Activity
    const caughtUp = (yield* GenerationStore).caughtUp
    const keys = yield* KeyStore

    /** The caller's scope, with the workspace it names checked. */
    const scopeOf = (p: PrincipalShape, workspaceId: string | undefined, keyHash: string | undefined) =>
      Effect.gen(function* () {
        if (!p.isManagement) {
          if (keyHash !== undefined && keyHash !== p.hash) {
            return yield* new Forbidden({ message: "An inference key sees only its own usage and generations; api_key_hash names another key" })
          }
          return { keyHash: p.hash } satisfies UsageScope
        }
        const workspaces = yield* activity.workspacesOf(p.userId)
        if (workspaceId !== undefined && !workspaces.includes(workspaceId)) {
          return yield* new NotFound({ message: `Workspace ${clipped(workspaceId)} not found` })
        }
        // A key of no workspace the caller may use is not found either (an answer of zeros read as
        // "unused"); a deleted key of one is found: its past usage is still the workspace's.
        if (keyHash !== undefined) {
          const keyWorkspace = yield* keys.workspaceOfAny(keyHash)
          if (keyWorkspace === undefined || !workspaces.includes(keyWorkspace)) {
            return yield* new NotFound({ message: `API key ${clipped(keyHash)} not found` })
          }
        }
        return { workspaces } satisfies UsageScope
      })

    return handlers
      .handle("activity", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* requireManagement
          const window = activityWindow(Date.now())
          if (urlParams.date !== undefined && (urlParams.date < window.from || urlParams.date > window.to)) {
            return yield* new BadRequest({
              message: `Invalid request: date: must be one of the last 30 completed UTC days (${window.from} to ${window.to})`,
            })
          }
          const scope = yield* scopeOf(p, urlParams.workspace_id, urlParams.api_key_hash)
          yield* caughtUp
          const from = urlParams.date ?? window.from
          const to = urlParams.date ?? window.to
          const filter = { workspaceId: urlParams.workspace_id, keyHash: urlParams.api_key_hash, userId: urlParams.user_id }
          return { data: yield* activity.activity(scope, filter, from, to, urlParams.group_by === "workspace") }
        }),
      )
      .handle("summary", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* Principal
          const to = urlParams.to ?? dayAt(Date.now())
          const from = urlParams.from ?? dayAt(Date.parse(`${to}T00:00:00Z`) - 29 * DAY_MS)
          if (from > to) return yield* new BadRequest({ message: `Invalid request: from: must not be after to (${to})` })
          if (daysBetween(from, to).length > SUMMARY_MAX_DAYS) {
            return yield* new BadRequest({ message: `Invalid request: from: the range must be at most ${SUMMARY_MAX_DAYS} days` })
          }
          const scope = yield* scopeOf(p, urlParams.workspace_id, urlParams.api_key_hash)
          yield* caughtUp
          const filter = { workspaceId: urlParams.workspace_id, keyHash: urlParams.api_key_hash, model: urlParams.model }
          return { data: yield* activity.summary(scope, filter, from, to) }
        }),
      )
      .handle("log", ({ urlParams }) =>
        Effect.gen(function* () {
          const p = yield* Principal
          if (urlParams.from !== undefined && urlParams.to !== undefined && Date.parse(urlParams.from) > Date.parse(urlParams.to)) {
            return yield* new BadRequest({ message: "Invalid request: from: must not be after to" })
          }
          const scope = yield* scopeOf(p, urlParams.workspace_id, urlParams.api_key_hash)
          yield* caughtUp
          const { page, next } = yield* activity.logPage(scope, urlParams)
          return { data: page.map(generationView), next_cursor: next }
        }),
      )
  }),
)
