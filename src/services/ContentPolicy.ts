/**
 * Whether a generation's content (input messages, completion, reasoning) is stored: when the
 * workspace's `is_observability_io_logging_enabled` is on, sampled by `io_logging_sampling_rate`,
 * and restricted to `io_logging_api_key_ids` when set. It is also the data plane's reader of the
 * workspace's routing defaults (`default_provider_sort`, `default_text_model`). Workspace
 * settings are cached in memory for a short while so the hot path does no I/O on a hit.
 */
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { now as clockNow } from "../clock.js"

interface LoggingSettings {
  readonly enabled: boolean
  readonly samplingRate: number
  readonly keyIds: ReadonlySet<number> | null
}

/** What the router takes from the workspace when the request does not say. */
export interface RoutingDefaults {
  readonly defaultTextModel: string | null
  readonly defaultProviderSort: "price" | "throughput" | "latency" | "exacto" | null
}

export interface WorkspaceSettings extends LoggingSettings, RoutingDefaults {
  /** Server tools the workspace turned off (`disabled_server_tools`): a request naming one is a 400. */
  readonly disabledServerTools?: ReadonlyArray<string>
}

/** Whether one request's content is stored under these settings. `random` is injectable for tests. */
export const storesContent = (s: WorkspaceSettings, keyId: number, random: () => number = Math.random): boolean => {
  if (!s.enabled) return false
  if (s.keyIds !== null && !s.keyIds.has(keyId)) return false
  return s.samplingRate >= 1 || random() < s.samplingRate
}

const NO_DEFAULTS: RoutingDefaults = { defaultTextModel: null, defaultProviderSort: null }
const SORTS: ReadonlySet<string> = new Set(["price", "throughput", "latency", "exacto"])

const CACHE_TTL_MS = 2_000

export class ContentPolicy extends Effect.Service<ContentPolicy>()("ContentPolicy", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const cache = new Map<string, { readonly settings: WorkspaceSettings; readonly at: number }>()

    const load = (workspaceId: string) =>
      sql<{
        is_observability_io_logging_enabled: number
        io_logging_sampling_rate: number
        io_logging_api_key_ids: string | null
        default_text_model: string | null
        default_provider_sort: string | null
        disabled_server_tools: string | null
      }>`SELECT is_observability_io_logging_enabled, io_logging_sampling_rate, io_logging_api_key_ids,
           default_text_model, default_provider_sort, disabled_server_tools
         FROM workspaces WHERE id = ${workspaceId}`.pipe(
        Effect.map((rows): WorkspaceSettings => {
          const row = rows[0]
          if (row === undefined) return { enabled: false, samplingRate: 0, keyIds: null, ...NO_DEFAULTS }
          const sort = row.default_provider_sort
          const ids = row.io_logging_api_key_ids === null ? null : (JSON.parse(row.io_logging_api_key_ids) as Array<number>)
          const disabled = row.disabled_server_tools === null ? [] : (JSON.parse(row.disabled_server_tools) as Array<string>)
          return {
            disabledServerTools: disabled,
            enabled: Number(row.is_observability_io_logging_enabled) === 1,
            samplingRate: Number(row.io_logging_sampling_rate),
            keyIds: ids === null ? null : new Set(ids.map(Number)),
            defaultTextModel: row.default_text_model === "" ? null : row.default_text_model,
            defaultProviderSort: sort !== null && SORTS.has(sort) ? (sort as RoutingDefaults["defaultProviderSort"]) : null,
          }
        }),
        Effect.orDie,
      )

    /** The workspace's settings from memory while fresh, else undefined (plain code, no I/O). */
    const peek = (workspaceId: string): WorkspaceSettings | undefined => {
      const hit = cache.get(workspaceId)
      return hit !== undefined && clockNow() - hit.at < CACHE_TTL_MS ? hit.settings : undefined
    }

    /** The workspace's settings: from memory, or loaded (and kept) on a miss. */
    const settingsOf = (workspaceId: string): Effect.Effect<WorkspaceSettings> =>
      Effect.suspend(() => {
        const hit = peek(workspaceId)
        if (hit !== undefined) return Effect.succeed(hit)
        const now = clockNow()
        return Effect.tap(load(workspaceId), (settings) => Effect.sync(() => cache.set(workspaceId, { settings, at: now })))
      })

    /** Forget cached settings (after a workspace PATCH). */
    const invalidate = (workspaceId: string) => Effect.sync(() => cache.delete(workspaceId))

    return { peek, settingsOf, invalidate } as const
  }),
}) {}
