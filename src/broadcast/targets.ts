/**
 * What the commit side reads of the destinations (docs/broadcast.md): each workspace's broadcast
 * switch and its enabled destinations with their filters (privacy mode, sampling rate, the keys
 * they take), cached by the outbox (src/broadcast/outbox.ts); and whether there is anything to
 * deliver at all, which decides when the delivery Worker starts.
 */
import type { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import type { WorkspaceTargets } from "./outbox.js"

/** The targets of each workspace in `workspaceIds`: its switch and its enabled destinations' filters. */
export const loadTargets = (sql: SqlClient.SqlClient, workspaceIds: ReadonlyArray<string>) =>
  Effect.gen(function* () {
    const flags = yield* sql<{ id: string; enabled: number }>`SELECT id, is_observability_broadcast_enabled AS enabled
      FROM workspaces WHERE id IN ${sql.in(workspaceIds)}`
    const rows = yield* sql<{
      id: string
      workspace_id: string
      privacy_mode: number
      sampling_rate: number
      api_key_hashes: string | null
    }>`SELECT id, workspace_id, privacy_mode, sampling_rate, api_key_hashes FROM observability_destinations
      WHERE enabled = 1 AND workspace_id IN ${sql.in(workspaceIds)}`
    const out = new Map<string, WorkspaceTargets>()
    for (const ws of workspaceIds) {
      const flag = flags.find((f) => f.id === ws)
      out.set(ws, {
        enabled: flag !== undefined && Number(flag.enabled) === 1,
        destinations: rows
          .filter((r) => r.workspace_id === ws)
          .map((r) => ({
            id: r.id,
            privacyMode: Number(r.privacy_mode) === 1,
            samplingRate: Number(r.sampling_rate),
            keyHashes: r.api_key_hashes === null ? null : new Set(JSON.parse(r.api_key_hashes) as Array<string>),
          })),
      })
    }
    return out as ReadonlyMap<string, WorkspaceTargets>
  }).pipe(Effect.orDie)

/** Whether any destination exists (in any workspace). */
export const anyDestination = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM observability_destinations LIMIT 1) AS d`.pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0),
  )

/** Whether delivery rows wait to be sent (left from an earlier run, say). */
export const rowsWaiting = (sql: SqlClient.SqlClient) =>
  sql<{ n: number }>`SELECT COUNT(*) AS n FROM (SELECT 1 FROM broadcast_deliveries WHERE state = 'pending' LIMIT 1) AS w`.pipe(
    Effect.map((rows) => Number(rows[0]?.n ?? 0) > 0),
  )
