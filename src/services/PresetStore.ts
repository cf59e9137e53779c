/**
 * Presets and their immutable, ascending versions, scoped to a user. A new version is one
 * upsert on the preset row (create it, or bump its `latest_version` counter and point
 * `designated_version_id` at the new version) plus one insert, in one transaction: the row
 * lock (Postgres) or the single writer (SQLite) makes the numbers 1..N with no gaps or
 * duplicates under concurrent creates; UNIQUE (preset_id, version) guards it besides.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect, Option } from "effect"
import type { Preset, PresetConfig, PresetVersion, VersionBody } from "../domain/presets.js"
import { now as clockNow } from "../clock.js"

export interface PresetRow {
  readonly id: string
  readonly user_id: string
  readonly workspace_id: string
  readonly slug: string
  readonly name: string
  readonly description: string
  readonly status: "active"
  readonly latest_version: number
  readonly designated_version_id: string
  readonly created_at: string
  readonly updated_at: string
  readonly status_updated_at: string
}

interface VersionRow {
  readonly id: string
  readonly preset_id: string
  readonly version: number
  readonly config: string
  readonly system_prompt: string | null
  readonly creator_id: string
  readonly created_at: string
  readonly updated_at: string
}

/** A preset with the version requests use (the latest), as the request path needs it. */
export interface ResolvedPreset {
  readonly preset: Preset
  readonly version: PresetVersion & { readonly config: PresetConfig }
}

export interface NewPresetVersion extends VersionBody {
  readonly userId: string
  /** The workspace of the calling key; recorded when the preset is created. */
  readonly workspaceId: string
  readonly slug: string
}

const presetView = (row: PresetRow): Preset => ({
  id: row.id,
  slug: row.slug,
  name: row.name,
  description: row.description,
  status: "active",
  workspace_id: row.workspace_id,
  creator_user_id: row.user_id,
  designated_version_id: row.designated_version_id,
  created_at: row.created_at,
  updated_at: row.updated_at,
  status_updated_at: row.status_updated_at,
})

const versionView = (row: VersionRow): PresetVersion & { readonly config: PresetConfig } => ({
  id: row.id,
  preset_id: row.preset_id,
  version: Number(row.version),
  config: JSON.parse(row.config) as PresetConfig,
  system_prompt: row.system_prompt,
  creator_id: row.creator_id,
  created_at: row.created_at,
  updated_at: row.updated_at,
})

export class PresetStore extends Effect.Service<PresetStore>()("PresetStore", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    // (user, slug) → resolved preset, for the request path. Entries expire so other
    // processes' new versions are seen within the TTL; this process's writes evict at once.
    const cache = new Map<string, { readonly value: ResolvedPreset; readonly at: number }>()
    const CACHE_TTL_MS = 2_000
    const CACHE_MAX = 10_000
    const cacheKey = (userId: string, slug: string) => `${userId}\u0000${slug}`

    const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

    /** Creates the preset on its first version, otherwise appends the next version. */
    const createVersion = (input: NewPresetVersion) =>
      Effect.gen(function* () {
        const now = yield* nowIso
        const versionId = crypto.randomUUID()
        const [preset] = yield* sql<PresetRow>`INSERT INTO presets
            (id, user_id, workspace_id, slug, name, description, status, latest_version,
             designated_version_id, created_at, updated_at, status_updated_at)
          VALUES (${crypto.randomUUID()}, ${input.userId}, ${input.workspaceId}, ${input.slug}, ${input.slug}, ${""},
            ${"active"}, 1, ${versionId}, ${now}, ${now}, ${now})
          ON CONFLICT (user_id, slug) DO UPDATE SET
            latest_version = presets.latest_version + 1,
            designated_version_id = excluded.designated_version_id,
            updated_at = excluded.updated_at
          RETURNING *`
        if (preset === undefined) return yield* Effect.dieMessage("preset upsert returned no row")
        const [version] = yield* sql<VersionRow>`INSERT INTO preset_versions
            (id, preset_id, version, config, system_prompt, creator_id, created_at, updated_at)
          VALUES (${versionId}, ${preset.id}, ${preset.latest_version}, ${JSON.stringify(input.config)},
            ${input.systemPrompt}, ${input.userId}, ${now}, ${now})
          RETURNING *`
        if (version === undefined) return yield* Effect.dieMessage("version insert returned no row")
        return { preset: presetView(preset), version: versionView(version) }
      }).pipe(
        sql.withTransaction,
        Effect.tap(() => Effect.sync(() => cache.delete(cacheKey(input.userId, input.slug)))),
        Effect.orDie,
      )

    const findRow = (userId: string, slug: string) =>
      sql<PresetRow>`SELECT * FROM presets WHERE user_id = ${userId} AND slug = ${slug}`.pipe(
        Effect.map((rows) => Option.fromNullable(rows[0])),
        Effect.orDie,
      )

    /** The user's preset, or none: another user's preset does not exist for the caller. */
    const find = (userId: string, slug: string) => Effect.map(findRow(userId, slug), Option.map(presetView))

    const list = (userId: string) =>
      sql<PresetRow>`SELECT * FROM presets WHERE user_id = ${userId} ORDER BY created_at, slug`.pipe(
        Effect.map((rows) => rows.map(presetView)),
        Effect.orDie,
      )

    /** One page of a preset's versions, oldest first, with the total count. */
    const versions = (presetId: string, page: { readonly limit: number; readonly offset: number }) =>
      Effect.all({
        data: sql<VersionRow>`SELECT * FROM preset_versions WHERE preset_id = ${presetId}
            ORDER BY version LIMIT ${page.limit} OFFSET ${page.offset}`.pipe(Effect.map((rows) => rows.map(versionView))),
        total_count: sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM preset_versions
            WHERE preset_id = ${presetId}`.pipe(Effect.map((rows) => Number(rows[0]?.n ?? 0))),
      }).pipe(Effect.orDie)

    const version = (presetId: string, number: number) =>
      sql<VersionRow>`SELECT * FROM preset_versions WHERE preset_id = ${presetId} AND version = ${number}`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), versionView)),
        Effect.orDie,
      )

    /** The user's preset with its designated version, read from the store (not the request path's cache). */
    const loadResolved = (userId: string, slug: string) =>
      sql<PresetRow & { v_id: string; v_version: number; v_config: string; v_system_prompt: string | null; v_creator_id: string; v_created_at: string; v_updated_at: string }>`
        SELECT p.*, v.id AS v_id, v.version AS v_version, v.config AS v_config, v.system_prompt AS v_system_prompt,
          v.creator_id AS v_creator_id, v.created_at AS v_created_at, v.updated_at AS v_updated_at
        FROM presets p JOIN preset_versions v ON v.id = p.designated_version_id
        WHERE p.user_id = ${userId} AND p.slug = ${slug}`.pipe(
        Effect.map((rows) =>
          Option.map(
            Option.fromNullable(rows[0]),
            (row): ResolvedPreset => ({
              preset: presetView(row),
              version: versionView({
                id: row.v_id,
                preset_id: row.id,
                version: row.v_version,
                config: row.v_config,
                system_prompt: row.v_system_prompt,
                creator_id: row.v_creator_id,
                created_at: row.v_created_at,
                updated_at: row.v_updated_at,
              }),
            }),
          ),
        ),
        Effect.orDie,
      )

    /**
     * The request path's lookup: the user's preset and its designated (latest) version, from
     * memory when fresh. Only found presets are cached, so unknown slugs cannot fill memory.
     */
    /** A found preset from memory while fresh, else undefined (plain code, no I/O). */
    const peek = (userId: string, slug: string): ResolvedPreset | undefined => {
      const hit = cache.get(cacheKey(userId, slug))
      return hit !== undefined && clockNow() - hit.at < CACHE_TTL_MS ? hit.value : undefined
    }

    const resolve = (userId: string, slug: string): Effect.Effect<Option.Option<ResolvedPreset>> =>
      Effect.suspend(() => {
        const key = cacheKey(userId, slug)
        const hit = peek(userId, slug)
        const now = clockNow()
        if (hit !== undefined) return Effect.succeed(Option.some(hit))
        return Effect.tap(loadResolved(userId, slug), (found) =>
          Effect.sync(() => {
            if (Option.isNone(found)) {
              cache.delete(key)
              return
            }
            if (cache.size >= CACHE_MAX) cache.clear()
            cache.set(key, { value: found.value, at: now })
          }),
        )
      })

    return { createVersion, find, findWithVersion: loadResolved, list, versions, version, resolve, peek } as const
  }),
}) {}
