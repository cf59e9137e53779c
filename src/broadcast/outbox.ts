/**
 * The commit side of broadcast: the ledger hook that adds, in the transaction of a batch of
 * generations, what the worker needs to deliver the ones some destination wants: one
 * `broadcast_batches` row for the batch (what each wanted generation's record lacks and which destinations
 * want it), a `broadcast_contents` row with their prompts and completions sealed once (only those
 * a destination outside privacy mode wants), both packed (`packJson` in src/broadcast/payload.ts), and one small `broadcast_deliveries` row per destination that wants any of
 * them (migration 0017). It only selects and inserts (filter rules and caps are the worker's):
 * the workspace's `is_observability_broadcast_enabled`, the destination enabled, the key among
 * its `api_key_hashes` (null: every key), and its `sampling_rate` (deterministic per session, so
 * a session is wholly in or out; per generation without one). Each workspace's targets are cached
 * in memory (a miss loads them before the transaction opens; a change through Destinations
 * invalidates at once, other processes' changes within the cache's lifetime).
 */
import { now as clockNow } from "../clock.js"
import type { GenerationEntry } from "../domain/generations.js"
import type { LedgerRows } from "../store/ledger.js"
import { contentOf, type DeliveryContent, extrasOf, type OutboxItems, packJson } from "./payload.js"

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

export const BATCH_COLUMNS = ["id", "created_at", "items", "bytes"] as const
export const CONTENT_COLUMNS = ["batch_id", "content"] as const

export const DELIVERY_COLUMNS = [
  "batch_id",
  "destination_id",
  "generations",
  "created_at",
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
    const destinations: Array<string> = []
    const indexOf = new Map<string, number>()
    const counts: Array<number> = []
    const generations: Array<OutboxItems["generations"][number]> = []
    const contents: Array<DeliveryContent | null> = []
    let withContent = false
    for (const entry of entries) {
      const targets = targetsOf(entry.workspaceId)
      if (targets === undefined || !targets.enabled || targets.destinations.length === 0) continue
      let to: Array<number> | undefined
      let needsContent = false
      for (const target of targets.destinations) {
        if (!wants(target, entry)) continue
        let at = indexOf.get(target.id)
        if (at === undefined) {
          at = destinations.length
          destinations.push(target.id)
          indexOf.set(target.id, at)
          counts.push(0)
        }
        counts[at] = (counts[at] ?? 0) + 1
        to ??= []
        to.push(at)
        if (!target.privacyMode) needsContent = true
      }
      if (to === undefined) continue
      generations.push({ payload: extrasOf(entry), to })
      const content = needsContent ? (contentOf(entry) ?? null) : null
      if (content !== null) withContent = true
      contents.push(content)
    }
    const first = generations[0]
    if (first === undefined) return []
    const now = clockNow()
    // The first wanted generation's id names the batch: a generation is committed once.
    const batchId = first.payload.id
    const items = packJson(JSON.stringify({ destinations, generations } satisfies OutboxItems))
    const content = withContent ? deps.seal(packJson(JSON.stringify(contents))) : undefined
    // What the batch holds on disk, for the cap on pending bytes (characters: both are ASCII).
    const bytes = items.length + (content?.length ?? 0)
    return [
      { table: "broadcast_batches", columns: BATCH_COLUMNS, rows: [{ id: batchId, created_at: now, items, bytes }] },
      ...(content !== undefined ? [{ table: "broadcast_contents", columns: CONTENT_COLUMNS, rows: [{ batch_id: batchId, content }] }] : []),
      {
        table: "broadcast_deliveries",
        columns: DELIVERY_COLUMNS,
        rows: destinations.map((destinationId, i) => ({
          batch_id: batchId,
          destination_id: destinationId,
          generations: counts[i] ?? 0,
          created_at: now,
          state: "pending",
          attempts: 0,
          next_attempt_at: now,
          claimed_until: 0,
          last_error: null,
          finished_at: null,
        })),
      },
    ]
  }

  const hook = (entries: ReadonlyArray<GenerationEntry>) => {
    const now = clockNow()
    let missing: Set<string> | undefined
    for (const e of entries) {
      if (fresh(e.workspaceId, now) !== undefined) continue
      missing ??= new Set()
      missing.add(e.workspaceId)
    }
    if (missing === undefined) return rowsOf(entries, (ws) => fresh(ws, now))
    const asked = generation
    return deps.load([...missing]).then(
      (loaded) => {
        const at = clockNow()
        if (asked === generation) for (const [ws, targets] of loaded) cache.set(ws, { targets, at })
        return rowsOf(entries, (ws) => loaded.get(ws) ?? fresh(ws, at))
      },
      (e: unknown) => {
        // The store is away (an outage): the targets last read still decide, so the batch, which
        // goes to the ledger spool, keeps its outbox rows. A workspace never read fails the batch
        // as the load did (the writer spools it and asks this hook again when it commits it).
        for (const ws of missing) if (cache.get(ws) === undefined) throw e
        return rowsOf(entries, (ws) => cache.get(ws)?.targets)
      },
    )
  }

  // An invalidated entry stays as the fallback of a load that fails; `fresh` no longer answers it.
  const invalidate = (workspaceId?: string) => {
    generation++
    if (workspaceId === undefined) for (const [ws, hit] of cache) cache.set(ws, { targets: hit.targets, at: Number.NEGATIVE_INFINITY })
    else {
      const hit = cache.get(workspaceId)
      if (hit !== undefined) cache.set(workspaceId, { targets: hit.targets, at: Number.NEGATIVE_INFINITY })
    }
  }

  return { hook, invalidate }
}
