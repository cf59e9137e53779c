/**
 * The commit side of broadcast: the ledger hook that adds, in the transaction of a batch of
 * generations, one delivery row per destination that wants each of them. It only selects and
 * inserts (filter rules, payloads and caps are the worker's): the workspace's
 * `is_observability_broadcast_enabled`, the destination enabled, the key among its
 * `api_key_hashes` (null: every key), and its `sampling_rate` (deterministic per session, so a
 * session is wholly in or out; per generation without one). Each workspace's targets are cached
 * in memory (a miss loads them before the transaction opens; a change through Destinations
 * invalidates at once, other processes' changes within the cache's lifetime). The prompt and
 * completion go sealed with the gateway's secret (never for a destination in privacy mode).
 */
import type { GenerationEntry } from "../domain/generations.js"
import type { LedgerRows } from "../store/ledger.js"
import { contentOf, payloadOf } from "./payload.js"

/** A destination as the commit sees it. */
export interface OutboxTarget {
  readonly id: string
  readonly privacyMode: boolean
  readonly samplingRate: number
  readonly keyHashes: ReadonlySet<string> | null
}

export interface WorkspaceTargets {
  /** `is_observability_broadcast_enabled`. */
  readonly enabled: boolean
  /** Its enabled destinations. */
  readonly destinations: ReadonlyArray<OutboxTarget>
}

export const DELIVERY_COLUMNS = [
  "id",
  "destination_id",
  "generation_id",
  "created_at",
  "payload",
  "content",
  "state",
  "attempts",
  "next_attempt_at",
  "claimed_until",
  "last_error",
  "finished_at",
] as const

/**
 * 32-bit FNV-1a with murmur3's finalizer: a stable hash for sampling. Plain FNV-1a's high bits
 * barely move with the last character, so `session-0` … `session-9` all fell on one side.
 */
const fnv1a = (text: string): number => {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** Whether a destination with `rate` takes this generation: the same answer for every generation of a session. */
export const sampled = (destinationId: string, rate: number, sessionId: string | null, generationId: string): boolean => {
  if (rate >= 1) return true
  if (rate <= 0) return false
  return fnv1a(`${destinationId}\u0000${sessionId ?? generationId}`) / 0x1_0000_0000 < rate
}

export const wants = (target: OutboxTarget, entry: GenerationEntry): boolean =>
  (target.keyHashes === null || target.keyHashes.has(entry.keyHash)) &&
  sampled(target.id, target.samplingRate, entry.sessionId, entry.id)

const CACHE_TTL_MS = 2_000

export interface Outbox {
  readonly hook: (entries: ReadonlyArray<GenerationEntry>) => ReadonlyArray<LedgerRows> | Promise<ReadonlyArray<LedgerRows>>
  /** Forget a workspace's cached targets (or every workspace's). */
  readonly invalidate: (workspaceId?: string) => void
}

export const makeOutbox = (deps: {
  readonly load: (workspaceIds: ReadonlyArray<string>) => Promise<ReadonlyMap<string, WorkspaceTargets>>
  readonly seal: (plain: string) => string
}): Outbox => {
  const cache = new Map<string, { readonly targets: WorkspaceTargets; readonly at: number }>()
  // A load that began before an invalidation must not put back what it read.
  let generation = 0

  const fresh = (workspaceId: string, now: number) => {
    const hit = cache.get(workspaceId)
    return hit !== undefined && now - hit.at < CACHE_TTL_MS ? hit.targets : undefined
  }

  const rowsOf = (entries: ReadonlyArray<GenerationEntry>, targetsOf: (ws: string) => WorkspaceTargets | undefined): ReadonlyArray<LedgerRows> => {
    const now = Date.now()
    const rows: Array<Record<string, string | number | null>> = []
    for (const entry of entries) {
      const targets = targetsOf(entry.workspaceId)
      if (targets === undefined || !targets.enabled || targets.destinations.length === 0) continue
      let payload: string | undefined
      let content: string | null | undefined
      for (const target of targets.destinations) {
        if (!wants(target, entry)) continue
        payload ??= JSON.stringify(payloadOf(entry))
        if (!target.privacyMode && content === undefined) {
          const plain = contentOf(entry)
          content = plain === undefined ? null : deps.seal(JSON.stringify(plain))
        }
        rows.push({
          id: `${entry.id}:${target.id}`,
          destination_id: target.id,
          generation_id: entry.id,
          created_at: now,
          payload,
          content: target.privacyMode ? null : (content ?? null),
          state: "pending",
          attempts: 0,
          next_attempt_at: now,
          claimed_until: 0,
          last_error: null,
          finished_at: null,
        })
      }
    }
    return rows.length === 0 ? [] : [{ table: "broadcast_deliveries", columns: DELIVERY_COLUMNS, rows }]
  }

  const hook = (entries: ReadonlyArray<GenerationEntry>) => {
    const now = Date.now()
    let missing: Set<string> | undefined
    for (const e of entries) {
      if (fresh(e.workspaceId, now) !== undefined) continue
      missing ??= new Set()
      missing.add(e.workspaceId)
    }
    if (missing === undefined) return rowsOf(entries, (ws) => fresh(ws, now))
    const asked = generation
    return deps.load([...missing]).then((loaded) => {
      const at = Date.now()
      if (asked === generation) for (const [ws, targets] of loaded) cache.set(ws, { targets, at })
      return rowsOf(entries, (ws) => loaded.get(ws) ?? fresh(ws, at))
    })
  }

  const invalidate = (workspaceId?: string) => {
    generation++
    if (workspaceId === undefined) cache.clear()
    else cache.delete(workspaceId)
  }

  return { hook, invalidate }
}
