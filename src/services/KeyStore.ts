/**
 * API keys: create, read, update, delete, usage windows from the spend ledger, credits.
 * Secrets are random and prefixed; only their sha256 is stored. Hot-path lookups come from
 * an in-memory cache that every write through this service invalidates at once.
 */
import { SqlClient } from "@effect/sql"
import { randomBytes } from "node:crypto"
import { Clock, Context, Effect, Option, Runtime, Schema } from "effect"
import { type ApiKey, intervalMs, intervalText, type LimitReset, type RateLimit } from "../domain/keys.js"
import { fromNanoUsd, toNanoUsd } from "../domain/pricing.js"
import { windowStarts } from "../domain/windows.js"
import { addSpendWith, dayOf, rollUp, type SpendItem } from "../store/spend-rollup.js"
import { StoreTimeout } from "../store/unavailable.js"
import { Notifications } from "./Notifications.js"
import { now as clockNow } from "../clock.js"

export const SECRET_PREFIX = "sk-gw-v1-"

export interface KeyRow {
  readonly id: number
  readonly hash: string
  readonly user_id: string
  readonly workspace_id: string
  readonly name: string
  readonly label: string
  readonly is_management: number
  readonly disabled: number
  /** The limit in nano-dollars, as stored and compared. */
  readonly limit_nano: number | null
  /** The same limit in USD (`limit_nano` / 1e9), for the API and messages. */
  readonly limit_usd: number | null
  readonly limit_reset: LimitReset | null
  readonly include_byok_in_limit: number
  readonly reserved_nano: number
  readonly expires_at: string | null
  readonly deleted: number
  readonly created_at: string
  readonly updated_at: string
  /** 1 while the key's user owns or is a member of the key's workspace (read on the auth path). */
  readonly in_workspace?: number
  /** The key's request rate limit: both set, or both null (none). */
  readonly rate_limit_requests: number | null
  readonly rate_limit_interval_ms: number | null
}

/** A row of `api_keys` as the store returns it (BIGINT columns may come back as numbers or strings). */
export type StoredKeyRow = Omit<KeyRow, "limit_nano" | "limit_usd" | "reserved_nano" | "rate_limit_requests" | "rate_limit_interval_ms"> & {
  readonly limit_nano: number | string | null
  readonly reserved_nano: number | string
  readonly rate_limit_requests?: number | string | null
  readonly rate_limit_interval_ms?: number | string | null
}

/** The stored row with its money as numbers, and the limit in USD beside its nano-dollars. */
export const keyRowOf = (r: StoredKeyRow): KeyRow => {
  const limit = r.limit_nano === null ? null : Number(r.limit_nano)
  const rateRequests = r.rate_limit_requests == null ? null : Number(r.rate_limit_requests)
  const rateInterval = r.rate_limit_interval_ms == null ? null : Number(r.rate_limit_interval_ms)
  return {
    ...r,
    limit_nano: limit,
    limit_usd: limit === null ? null : fromNanoUsd(limit),
    reserved_nano: Number(r.reserved_nano),
    rate_limit_requests: rateRequests !== null && rateInterval !== null ? rateRequests : null,
    rate_limit_interval_ms: rateRequests !== null && rateInterval !== null ? rateInterval : null,
  }
}

/** Sums of nano-dollars (integers), one field per window. */
export interface UsageSummary {
  readonly usage: number
  readonly usage_daily: number
  readonly usage_weekly: number
  readonly usage_monthly: number
  readonly byok_usage: number
  readonly byok_usage_daily: number
  readonly byok_usage_weekly: number
  readonly byok_usage_monthly: number
  /** Spend that counts toward the limit in the limit's current window. */
  readonly limit_window: number
}

const zeroUsage: UsageSummary = {
  usage: 0,
  usage_daily: 0,
  usage_weekly: 0,
  usage_monthly: 0,
  byok_usage: 0,
  byok_usage_daily: 0,
  byok_usage_weekly: 0,
  byok_usage_monthly: 0,
  limit_window: 0,
}

/** SHA-256 of the secret, hex (Bun's one-shot hash: ~250 ns against ~550 ns through node:crypto). */
export const hashSecret = (secret: string): string => Bun.SHA256.hash(secret, "hex")

export const newSecret = () => `${SECRET_PREFIX}${randomBytes(32).toString("hex")}`

/** The masked form of a secret shown as the key's label: `sk-gw-v1-abc...xyz`. */
export const labelOf = (secret: string) => {
  const body = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret
  return `${SECRET_PREFIX}${body.slice(0, 3)}...${body.slice(-3)}`
}

export interface NewKey {
  readonly userId: string
  readonly workspaceId: string
  readonly name: string
  readonly limit?: number | null
  readonly limitReset?: LimitReset | null
  readonly includeByokInLimit?: boolean
  readonly expiresAt?: string | null
  readonly isManagement?: boolean
  /** A given secret (GATEWAY_MANAGEMENT_KEY); otherwise a random one. */
  readonly secret?: string
  readonly rateLimit?: RateLimit | null
}

export interface KeyPatch {
  readonly name?: string
  readonly disabled?: boolean
  readonly includeByokInLimit?: boolean
  readonly limit?: number | null
  readonly limitReset?: LimitReset | null
  readonly rateLimit?: RateLimit | null
}

/** Spend recorded directly (not by a model request); `createdAt` defaults to now. */
export interface SpendEntry extends Omit<SpendItem, "createdAt"> {
  readonly createdAt?: string
}

const bool = (b: boolean | undefined) => (b ? 1 : 0)

/** A rate limit as stored: its two columns (both null: none). */
const rateColumns = (limit: RateLimit | null | undefined): readonly [number | null, number | null] =>
  limit == null ? [null, null] : [limit.requests, intervalMs(limit.interval) ?? null]

/** A row's rate limit on the wire. */
export const rateLimitOf = (row: KeyRow): RateLimit | null =>
  row.rate_limit_requests === null || row.rate_limit_interval_ms === null
    ? null
    : { requests: row.rate_limit_requests, interval: intervalText(row.rate_limit_interval_ms) }

/** A limit in USD (or none) as stored: nano-dollars. */
const limitNano = (usd: number | null | undefined) => (usd == null ? null : toNanoUsd(usd))


/**
 * How long a cached key row is trusted: the bound on another process's change where notices do
 * not reach (tests stretch it); and how long a request waits for the store to read a key it has
 * not cached (the connection's own 5 s to connect, as long again to answer): past it, a store that
 * stalls without closing is unreachable (503), not a request held for the stall.
 */
export class KeyCacheOptions extends Context.Reference<KeyCacheOptions>()("KeyCacheOptions", {
  defaultValue: (): { readonly ttlMs: number; readonly readDeadlineMs?: number } => ({ ttlMs: 2_000 }),
}) {}

const KEY_READ_DEADLINE_MS = 5_000

/** The notice a key's write publishes to the other processes on the database: drop that key's cached row. */
export const KEY_CHANGED = "key.changed"
const decodeKeyChanged = Schema.decodeUnknownOption(Schema.Struct({ hash: Schema.String }))

export class KeyStore extends Effect.Service<KeyStore>()("KeyStore", {
  // long: the service's layer body, one closure by design: its methods share the SQL client, caches and subscriptions it opens (Effect.Service)
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const notifications = yield* Notifications
    // Hash → row. Entries expire so other processes' writes are seen within the TTL even when a
    // notice is missed (on Postgres, a key's write reaches the others at once as a notice).
    const cache = new Map<string, { readonly row: KeyRow; readonly at: number }>()
    const cacheOptions = yield* KeyCacheOptions
    const CACHE_TTL_MS = cacheOptions.ttlMs
    const readDeadlineMs = cacheOptions.readDeadlineMs ?? KEY_READ_DEADLINE_MS
    const MISS_CAPACITY = 10_000

    const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

    const loadByHash = (hash: string) =>
      sql<StoredKeyRow>`SELECT * FROM api_keys WHERE hash = ${hash} AND deleted = 0`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), keyRowOf)),
        Effect.orDie,
      )

    /** The hot-path lookup: memory first, the store on a miss or an expired entry. */
    /** The row with whether its user still belongs to its workspace (a removed member's key stops working). */
    const loadForAuth = (hash: string) =>
      sql<StoredKeyRow>`SELECT k.*, CASE WHEN EXISTS (
          SELECT 1 FROM workspaces w WHERE w.id = k.workspace_id AND (w.owner_user_id = k.user_id
            OR EXISTS (SELECT 1 FROM workspace_members m WHERE m.workspace_id = w.id AND m.user_id = k.user_id))
        ) THEN 1 ELSE 0 END AS in_workspace
        FROM api_keys k WHERE k.hash = ${hash} AND k.deleted = 0`.pipe(
        // Disconnected: a query on a stalled connection does not give way to its interruption until it ends.
        Effect.disconnect,
        Effect.timeoutFail({ duration: readDeadlineMs, onTimeout: () => new StoreTimeout(readDeadlineMs) }),
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), keyRowOf)),
        Effect.orDie,
      )

    // Bumped by every write: a load that started before a write must not refill the cache with
    // the row as it was (a disabled key would otherwise authenticate until the entry expired).
    let epoch = 0
    // Hot-path lookups answered from memory vs loaded from the store (GET /metrics).
    const cacheStats = { hits: 0, misses: 0 }

    /** The row from memory while its entry is fresh, else undefined (plain code, no I/O). */
    const peekByHash = (hash: string): KeyRow | undefined => {
      const hit = cache.get(hash)
      if (hit === undefined || clockNow() - hit.at >= CACHE_TTL_MS) return undefined
      cacheStats.hits++
      return hit.row
    }

    // Hashes the store did not know, with when it said so: random keys are answered from memory,
    // not by a store query each (least recently used first out; cleared when a key is created).
    const misses = new Map<string, number>()

    /** Whether the store said lately that no key has this hash (plain code, no I/O). */
    const peekMissing = (hash: string): boolean => {
      const at = misses.get(hash)
      if (at === undefined) return false
      misses.delete(hash)
      if (clockNow() - at >= CACHE_TTL_MS) return false
      misses.set(hash, at)
      cacheStats.hits++
      return true
    }

    const rememberMiss = (hash: string, at: number) => {
      misses.delete(hash)
      misses.set(hash, at)
      if (misses.size > MISS_CAPACITY) misses.delete(misses.keys().next().value as string)
    }

    const cachedByHash = (hash: string) =>
      Effect.suspend(() => {
        const row = peekByHash(hash)
        if (row !== undefined) return Effect.succeed(Option.some(row))
        if (peekMissing(hash)) return Effect.succeed(Option.none<KeyRow>())
        const now = clockNow()
        cacheStats.misses++
        const seen = epoch
        return Effect.tap(loadForAuth(hash), (row) =>
          Effect.sync(() => {
            if (epoch !== seen) return
            if (Option.isSome(row)) cache.set(hash, { row: row.value, at: now })
            else {
              cache.delete(hash)
              rememberMiss(hash, now)
            }
          }),
        )
      })

    /** Drops a key's cached row here (a write of this process, or another's notice). */
    const forget = (hash: string) => {
      epoch++
      cache.delete(hash)
      // A key created on another process: its hash may have been refused here a moment ago.
      misses.delete(hash)
    }
    // What else holds state derived from a key (Spend's budget leases): told of every change, here or
    // from another process; `undefined` for "any key" (notices may have been missed).
    const changeHooks = new Set<(hash: string | undefined) => Effect.Effect<void>>()
    const runtime = yield* Effect.runtime<never>()
    const hooksOf = (hash: string | undefined) => Effect.forEach(changeHooks, (hook) => hook(hash), { discard: true })
    /** Registers what to run when a key changes: awaited by this process's own writes, run at once on others' notices. */
    const onChanged = (hook: (hash: string | undefined) => Effect.Effect<void>): (() => void) => {
      changeHooks.add(hook)
      return () => changeHooks.delete(hook)
    }

    /** A write to key `hash`: dropped here (and what derives from it, before the write answers), and in every other process on the database. */
    const changed = (hash: string) =>
      // The notice first: the other processes act on it while this one does its own part.
      Effect.sync(() => forget(hash)).pipe(Effect.zipRight(notifications.publish(KEY_CHANGED, { hash })), Effect.zipRight(hooksOf(hash)))
    notifications.subscribe(KEY_CHANGED, (payload, own) => {
      if (own) return
      const notice = decodeKeyChanged(payload)
      if (Option.isSome(notice)) {
        forget(notice.value.hash)
        if (changeHooks.size > 0) Runtime.runFork(runtime)(hooksOf(notice.value.hash))
      }
    })
    // Notices may have been missed (the listener's connection was lost): every row may be stale.
    notifications.onResync(() => {
      epoch++
      cache.clear()
      misses.clear()
      if (changeHooks.size > 0) Runtime.runFork(runtime)(hooksOf(undefined))
    })

    const invalidate = changed

    const create = (input: NewKey) =>
      Effect.gen(function* () {
        const secret = input.secret ?? newSecret()
        const hash = hashSecret(secret)
        const now = yield* nowIso
        const [rateRequests, rateInterval] = rateColumns(input.rateLimit)
        yield* sql`INSERT INTO api_keys (hash, user_id, workspace_id, name, label, is_management, disabled,
            limit_nano, limit_reset, include_byok_in_limit, expires_at, created_at, updated_at,
            rate_limit_requests, rate_limit_interval_ms)
          VALUES (${hash}, ${input.userId}, ${input.workspaceId}, ${input.name}, ${labelOf(secret)},
            ${bool(input.isManagement)}, 0, ${limitNano(input.limit)}, ${input.limitReset ?? null},
            ${bool(input.includeByokInLimit)}, ${input.expiresAt ?? null}, ${now}, ${now},
            ${rateRequests}, ${rateInterval})`
        // After the insert: a load that began before it must not leave this hash (or any) as a miss.
        misses.clear()
        yield* changed(hash)
        const row = yield* loadByHash(hash)
        return { row: Option.getOrThrow(row), secret }
      }).pipe(Effect.orDie)

    /** A key of this user, or none: another user's key does not exist for the caller. */
    const findForUser = (userId: string, hash: string) =>
      Effect.map(loadByHash(hash), Option.filter((row) => row.user_id === userId))

    /**
     * The user's keys; with `everyUser`, every member's keys of `workspaceId` (for its admins,
     * who govern its members' keys).
     */
    const list = (userId: string, options: { offset: number; includeDisabled: boolean; limit?: number; workspaceId?: string; everyUser?: boolean }) =>
      sql<StoredKeyRow>`SELECT * FROM api_keys WHERE deleted = 0
          ${options.everyUser === true && options.workspaceId !== undefined ? sql`` : sql`AND user_id = ${userId}`}
          ${options.includeDisabled ? sql`` : sql`AND disabled = 0`}
          ${options.workspaceId === undefined ? sql`` : sql`AND workspace_id = ${options.workspaceId}`}
          ORDER BY id LIMIT ${options.limit ?? 100} OFFSET ${options.offset}`.pipe(
        Effect.map((rows) => rows.map(keyRowOf)),
        Effect.orDie,
      )

    const update = (hash: string, patch: KeyPatch) =>
      Effect.gen(function* () {
        const now = yield* nowIso
        const sets = [sql`updated_at = ${now}`]
        if (patch.name !== undefined) sets.push(sql`name = ${patch.name}`)
        if (patch.disabled !== undefined) sets.push(sql`disabled = ${bool(patch.disabled)}`)
        if (patch.includeByokInLimit !== undefined)
          sets.push(sql`include_byok_in_limit = ${bool(patch.includeByokInLimit)}`)
        if (patch.limit !== undefined) sets.push(sql`limit_nano = ${limitNano(patch.limit)}`)
        if (patch.limitReset !== undefined) sets.push(sql`limit_reset = ${patch.limitReset}`)
        if (patch.rateLimit !== undefined) {
          const [rateRequests, rateInterval] = rateColumns(patch.rateLimit)
          sets.push(sql`rate_limit_requests = ${rateRequests}`, sql`rate_limit_interval_ms = ${rateInterval}`)
        }
        // A changed limit policy: the next reservation recounts the window from the ledger.
        if (patch.limit !== undefined || patch.limitReset !== undefined || patch.includeByokInLimit !== undefined) {
          sets.push(sql`window_start = NULL`)
        }
        yield* sql`UPDATE api_keys SET ${sql.csv(sets)} WHERE hash = ${hash} AND deleted = 0`
        yield* changed(hash)
        return Option.getOrThrow(yield* loadByHash(hash))
      }).pipe(Effect.orDie)

    /** Deletes a key: it stops authenticating at once; its spend rows stay in the ledger. */
    const remove = (hash: string) =>
      Effect.gen(function* () {
        const now = yield* nowIso
        yield* sql`UPDATE api_keys SET deleted = 1, disabled = 1, updated_at = ${now} WHERE hash = ${hash}`
        yield* changed(hash)
      }).pipe(Effect.orDie)

    const usageOf = (rows: ReadonlyArray<KeyRow>) =>
      Effect.gen(function* () {
        const out = new Map<string, UsageSummary>()
        if (rows.length === 0) return out
        const nowMs = yield* Clock.currentTimeMillis
        const w = windowStarts(nowMs)
        const sums = yield* sql<{
          key_hash: string
          usage: number
          usage_daily: number
          usage_weekly: number
          usage_monthly: number
          byok_usage: number
          byok_usage_daily: number
          byok_usage_weekly: number
          byok_usage_monthly: number
        }>`SELECT key_hash,
            COALESCE(SUM(CASE WHEN is_byok = 0 THEN amount_nano END), 0) AS usage,
            COALESCE(SUM(CASE WHEN is_byok = 0 AND day >= ${dayOf(w.day)} THEN amount_nano END), 0) AS usage_daily,
            COALESCE(SUM(CASE WHEN is_byok = 0 AND day >= ${dayOf(w.week)} THEN amount_nano END), 0) AS usage_weekly,
            COALESCE(SUM(CASE WHEN is_byok = 0 AND day >= ${dayOf(w.month)} THEN amount_nano END), 0) AS usage_monthly,
            COALESCE(SUM(CASE WHEN is_byok = 1 THEN amount_nano END), 0) AS byok_usage,
            COALESCE(SUM(CASE WHEN is_byok = 1 AND day >= ${dayOf(w.day)} THEN amount_nano END), 0) AS byok_usage_daily,
            COALESCE(SUM(CASE WHEN is_byok = 1 AND day >= ${dayOf(w.week)} THEN amount_nano END), 0) AS byok_usage_weekly,
            COALESCE(SUM(CASE WHEN is_byok = 1 AND day >= ${dayOf(w.month)} THEN amount_nano END), 0) AS byok_usage_monthly
          FROM spend_daily WHERE ${sql.in("key_hash", rows.map((r) => r.hash))} GROUP BY key_hash`.pipe(Effect.orDie)
        const byHash = new Map(sums.map((s) => [s.key_hash, s]))
        for (const row of rows) {
          const s = byHash.get(row.hash)
          if (s === undefined) {
            out.set(row.hash, zeroUsage)
            continue
          }
          const pick = (nonByok: number, byok: number) =>
            Number(nonByok) + (row.include_byok_in_limit ? Number(byok) : 0)
          const windowSpend =
            row.limit_reset === "daily"
              ? pick(s.usage_daily, s.byok_usage_daily)
              : row.limit_reset === "weekly"
                ? pick(s.usage_weekly, s.byok_usage_weekly)
                : row.limit_reset === "monthly"
                  ? pick(s.usage_monthly, s.byok_usage_monthly)
                  : pick(s.usage, s.byok_usage)
          out.set(row.hash, {
            usage: Number(s.usage),
            usage_daily: Number(s.usage_daily),
            usage_weekly: Number(s.usage_weekly),
            usage_monthly: Number(s.usage_monthly),
            byok_usage: Number(s.byok_usage),
            byok_usage_daily: Number(s.byok_usage_daily),
            byok_usage_weekly: Number(s.byok_usage_weekly),
            byok_usage_monthly: Number(s.byok_usage_monthly),
            limit_window: windowSpend,
          })
        }
        return out
      })

    /** The wire object of a key. */
    const view = (row: KeyRow, usage: UsageSummary): ApiKey => ({
      hash: row.hash,
      name: row.name,
      label: row.label,
      disabled: row.disabled === 1,
      limit: row.limit_usd,
      // Subtracted in nano-dollars, then converted: $0.05 - $0.01 shows 0.04, not 0.04000000000000001.
      limit_remaining: row.limit_nano === null ? null : fromNanoUsd(Math.max(0, row.limit_nano - usage.limit_window)),
      limit_reset: row.limit_reset,
      include_byok_in_limit: row.include_byok_in_limit === 1,
      usage: fromNanoUsd(usage.usage),
      usage_daily: fromNanoUsd(usage.usage_daily),
      usage_weekly: fromNanoUsd(usage.usage_weekly),
      usage_monthly: fromNanoUsd(usage.usage_monthly),
      byok_usage: fromNanoUsd(usage.byok_usage),
      byok_usage_daily: fromNanoUsd(usage.byok_usage_daily),
      byok_usage_weekly: fromNanoUsd(usage.byok_usage_weekly),
      byok_usage_monthly: fromNanoUsd(usage.byok_usage_monthly),
      created_at: row.created_at,
      updated_at: row.updated_at,
      expires_at: row.expires_at,
      creator_user_id: row.user_id,
      workspace_id: row.workspace_id,
      external_user: null,
      id: Number(row.id),
      is_management_key: row.is_management === 1,
      rate_limit: rateLimitOf(row),
    })

    const viewOne = (row: KeyRow) =>
      Effect.map(usageOf([row]), (usage) => view(row, usage.get(row.hash) ?? zeroUsage))

    const viewMany = (rows: ReadonlyArray<KeyRow>) =>
      Effect.map(usageOf(rows), (usage) => rows.map((row) => view(row, usage.get(row.hash) ?? zeroUsage)))

    const recordSpend = (entries: ReadonlyArray<SpendEntry>) =>
      Effect.gen(function* () {
        if (entries.length === 0) return
        const now = yield* nowIso
        yield* addSpendWith(sql, rollUp(entries.map((e) => ({ ...e, createdAt: e.createdAt ?? now }))))
      }).pipe(Effect.orDie)

    const credits = (userId: string) =>
      Effect.gen(function* () {
        const granted = yield* sql<{ total: number }>`
          SELECT COALESCE(SUM(amount_nano), 0) AS total FROM credit_grants WHERE user_id = ${userId}`
        const used = yield* sql<{ total: number }>`
          SELECT COALESCE(SUM(amount_nano), 0) AS total FROM spend_daily WHERE user_id = ${userId} AND is_byok = 0`
        return {
          total_credits: fromNanoUsd(granted[0]?.total ?? 0),
          total_usage: fromNanoUsd(used[0]?.total ?? 0),
        }
      }).pipe(Effect.orDie)

    const addCredits = (userId: string, amountUsd: number, note?: string) =>
      Effect.gen(function* () {
        const now = yield* nowIso
        yield* sql`INSERT INTO credit_grants (user_id, amount_nano, note, created_at)
          VALUES (${userId}, ${toNanoUsd(amountUsd)}, ${note ?? null}, ${now})`
      }).pipe(Effect.orDie)

    /**
     * A management key with this hash made usable again, if a row has it: not deleted, not
     * disabled, no expiry. What was undone, or undefined when no row has the hash or nothing was.
     */
    const reinstateManagement = (hash: string) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ deleted: number; disabled: number; is_management: number; expires_at: string | null }>`SELECT deleted, disabled, is_management, expires_at FROM api_keys WHERE hash = ${hash}`
        const row = rows[0]
        if (row === undefined) return undefined
        const undone = [
          ...(Number(row.deleted) === 1 ? ["deleted"] : []),
          ...(Number(row.disabled) === 1 && Number(row.deleted) === 0 ? ["disabled"] : []),
          ...(Number(row.is_management) === 0 ? ["not a management key"] : []),
          ...(row.expires_at !== null ? ["expiring"] : []),
        ]
        if (undone.length === 0) return undefined
        const now = yield* nowIso
        yield* sql`UPDATE api_keys SET deleted = 0, disabled = 0, is_management = 1, expires_at = NULL, updated_at = ${now} WHERE hash = ${hash}`
        yield* changed(hash)
        return undone
      }).pipe(Effect.orDie)

    /** The workspace of the key with this hash, deleted or not (its past usage is still the workspace's), or undefined. */
    const workspaceOfAny = (hash: string) =>
      sql<{ workspace_id: string }>`SELECT workspace_id FROM api_keys WHERE hash = ${hash}`.pipe(
        Effect.map((rows) => rows[0]?.workspace_id),
        Effect.orDie,
      )

    const countAll = sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM api_keys`.pipe(
      Effect.map((rows) => Number(rows[0]?.n ?? 0)),
      Effect.orDie,
    )

    return {
      create,
      cachedByHash,
      peekByHash,
      peekMissing,
      /** Key-cache lookups so far: answered from memory, or loaded. */
      cacheStats: (): { readonly hits: number; readonly misses: number } => ({ ...cacheStats }),
      findForUser,
      /** A live key by its hash, whoever made it (the caller checks who may see it). */
      findByHash: loadByHash,
      list,
      update,
      remove,
      invalidate,
      onChanged,
      viewOne,
      viewMany,
      recordSpend,
      credits,
      addCredits,
      countAll,
      reinstateManagement,
      workspaceOfAny,
    } as const
  }),
  dependencies: [Notifications.Default],
}) {}
