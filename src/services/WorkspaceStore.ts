/**
 * Workspaces and their members: create, read, update, delete, the SCIM flag, and the
 * all-or-nothing removal of members. A user's workspaces are those it owns or is a member
 * of; the owner is always an admin member. Refusals a caller can act on fail with
 * BadRequest (nothing changed); SQL failures are defects.
 */
import { SqlClient, type SqlError } from "@effect/sql"
import { createHash } from "node:crypto"
import { Clock, Effect, Option } from "effect"
import { BadRequest } from "../domain/errors.js"
import { hasExpired } from "../domain/keys.js"
import { canonicalId } from "../domain/validation.js"
import type { Member, MemberRole, ProviderSort, Workspace } from "../domain/workspaces.js"
import { Users } from "./Users.js"

export interface WorkspaceRow {
  readonly id: string
  readonly owner_user_id: string
  readonly name: string
  readonly slug: string
  readonly description: string
  readonly default_text_model: string | null
  readonly default_image_model: string | null
  readonly default_provider_sort: ProviderSort | null
  /** JSON array of integers, or null. */
  readonly io_logging_api_key_ids: string | null
  readonly io_logging_sampling_rate: number
  readonly is_data_discount_logging_enabled: number
  readonly is_observability_broadcast_enabled: number
  readonly is_observability_io_logging_enabled: number
  /** JSON array of strings, or null. */
  readonly disabled_server_tools: string | null
  readonly is_default: number
  readonly created_by: string
  readonly created_at: string
  readonly updated_at: string | null
}

export interface MemberRow {
  readonly workspace_id: string
  readonly user_id: string
  readonly role: MemberRole
  readonly is_scim: number
  readonly created_at: string
}

/** A workspace as one user sees it: the row and that user's role in it. */
export interface VisibleWorkspace {
  readonly row: WorkspaceRow
  readonly role: MemberRole
}

/** Settings both create and update accept; undefined leaves a field as it is. */
export interface WorkspaceSettings {
  readonly description?: string | null
  readonly defaultTextModel?: string | null
  readonly defaultImageModel?: string | null
  readonly defaultProviderSort?: ProviderSort | null
  readonly ioLoggingApiKeyIds?: ReadonlyArray<number> | null
  readonly ioLoggingSamplingRate?: number
  readonly isDataDiscountLoggingEnabled?: boolean
  readonly isObservabilityBroadcastEnabled?: boolean
  readonly isObservabilityIoLoggingEnabled?: boolean
  readonly disabledServerTools?: ReadonlyArray<string> | null
}

export interface NewWorkspace extends WorkspaceSettings {
  readonly name: string
  readonly slug: string
}

export interface WorkspacePatch extends WorkspaceSettings {
  readonly name?: string
  readonly slug?: string
}

const bool = (b: boolean | undefined) => (b ? 1 : 0)
const json = (v: ReadonlyArray<unknown> | null | undefined) => (v == null ? null : JSON.stringify(v))
const parseArray = <A>(text: string | null): Array<A> | null => (text === null ? null : (JSON.parse(text) as Array<A>))
const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`

/** A stable member id per (workspace, user), formatted as a UUID. */
export const memberIdOf = (workspaceId: string, userId: string) => {
  const h = createHash("sha256").update(`${workspaceId}/${userId}`).digest("hex")
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-5${h.slice(13, 16)}-8${h.slice(17, 20)}-${h.slice(20, 32)}`
}

const constraintOf = (e: SqlError.SqlError): "unique" | "foreign_key" | undefined => {
  const cause = e.cause as { code?: unknown; message?: unknown } | undefined
  const text = `${String(cause?.code ?? "")} ${String(cause?.message ?? "")} ${e.message}`
  if (/23505|UNIQUE constraint failed|duplicate key value/i.test(text)) return "unique"
  if (/23503|FOREIGN KEY constraint failed|violates foreign key constraint/i.test(text)) return "foreign_key"
  return undefined
}

const slugTaken = (slug: string) =>
  new BadRequest({ message: `Invalid request: slug: '${slug}' is already used by another of your workspaces` })

export class WorkspaceStore extends Effect.Service<WorkspaceStore>()("WorkspaceStore", {
  // long: the service's layer body, one closure by design: its methods share the SQL client and the Users service it reads (Effect.Service)
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient
    const users = yield* Users

    const nowIso = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms).toISOString())

    const loadById = (id: string) =>
      Effect.map(sql<WorkspaceRow>`SELECT * FROM workspaces WHERE id = ${id}`, (rows) => Option.fromNullable(rows[0]))

    /** Workspaces the user owns or is a member of, with the user's role in each. */
    const visible = (userId: string) => sql`
      SELECT w.*, m.role AS member_role FROM workspaces w
      LEFT JOIN workspace_members m ON m.workspace_id = w.id AND m.user_id = ${userId}
      WHERE (w.owner_user_id = ${userId} OR m.user_id IS NOT NULL)`

    const roleOf = (userId: string, row: WorkspaceRow & { member_role: MemberRole | null }): VisibleWorkspace => {
      const { member_role, ...rest } = row
      // The owner is always an admin, whatever its membership row says.
      return { row: rest, role: rest.owner_user_id === userId ? "admin" : (member_role ?? "member") }
    }

    const list = (userId: string, options: { offset: number; limit: number }) =>
      Effect.gen(function* () {
        const rows = yield* sql<WorkspaceRow & { member_role: MemberRole | null }>`${visible(userId)}
          ORDER BY w.created_at, w.id LIMIT ${options.limit} OFFSET ${options.offset}`
        const total = yield* sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM (${visible(userId)}) v`
        return { rows: rows.map((r) => roleOf(userId, r).row), total: Number(total[0]?.n ?? 0) }
      }).pipe(Effect.orDie)

    /**
     * The workspace a user means by `ref`: its id, else its slug. A slug may name several
     * workspaces the user can see (every user has a `default`); the user's own comes first,
     * then the oldest of those it is a member of.
     */
    const findForUser = (userId: string, given: string) => {
      const ref = canonicalId(given)
      return sql<WorkspaceRow & { member_role: MemberRole | null }>`${visible(userId)}
        AND (w.id = ${ref} OR w.slug = ${ref})
        ORDER BY CASE WHEN w.id = ${ref} THEN 0 ELSE 1 END,
          CASE WHEN w.owner_user_id = ${userId} THEN 0 ELSE 1 END, w.created_at, w.id
        LIMIT 1`.pipe(
        Effect.map((rows) => Option.map(Option.fromNullable(rows[0]), (row) => roleOf(userId, row))),
        Effect.orDie,
      )
    }

    /** Workspaces matching an id or a slug across all owners (for the CLI, which has no caller). */
    const findAny = (given: string) => {
      const ref = canonicalId(given)
      return sql<WorkspaceRow>`SELECT * FROM workspaces WHERE id = ${ref} OR slug = ${ref} ORDER BY created_at, id`.pipe(
        Effect.map((rows) => {
          const exact = rows.filter((r) => r.id === ref)
          return exact.length > 0 ? exact : rows
        }),
        Effect.orDie,
      )
    }

    /** Fails naming io_logging_api_key_ids unless every id is a key of the user (or, when given, of the workspace). */
    const checkKeyIds = (userId: string, ids: ReadonlyArray<number> | null | undefined, workspaceId?: string) =>
      Effect.gen(function* () {
        if (ids == null || ids.length === 0) return
        const wanted = [...new Set(ids)]
        const found = yield* sql<{ id: number }>`SELECT id FROM api_keys
          WHERE deleted = 0 AND id IN ${sql.in(wanted)}
          AND (user_id = ${userId} ${workspaceId === undefined ? sql`` : sql`OR workspace_id = ${workspaceId}`})`
        const known = new Set(found.map((r) => Number(r.id)))
        const unknown = wanted.filter((id) => !known.has(id))
        if (unknown.length > 0) {
          return yield* new BadRequest({
            message: `Invalid request: io_logging_api_key_ids: ${unknown.join(", ")} ${unknown.length === 1 ? "is not the id" : "are not ids"} of ${
              workspaceId === undefined ? "your API keys" : "your API keys or of keys in this workspace"
            }`,
          })
        }
      })

    const slugInUse = (ownerId: string, slug: string, exceptId?: string) =>
      Effect.map(
        sql<{ n: number }>`SELECT CAST(COUNT(*) AS INTEGER) AS n FROM workspaces
          WHERE owner_user_id = ${ownerId} AND slug = ${slug}
          ${exceptId === undefined ? sql`` : sql`AND id <> ${exceptId}`}`,
        (rows) => Number(rows[0]?.n ?? 0) > 0,
      )

    /** Creates a workspace owned by the user, who becomes its admin member. */
    const create = (userId: string, input: NewWorkspace) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            if (yield* slugInUse(userId, input.slug)) return yield* slugTaken(input.slug)
            yield* checkKeyIds(userId, input.ioLoggingApiKeyIds)
            const id = crypto.randomUUID()
            const now = yield* nowIso
            yield* sql`INSERT INTO workspaces (id, owner_user_id, name, slug, description, default_text_model,
                default_image_model, default_provider_sort, io_logging_api_key_ids, io_logging_sampling_rate,
                is_data_discount_logging_enabled, is_observability_broadcast_enabled,
                is_observability_io_logging_enabled, disabled_server_tools, is_default, created_by, created_at, updated_at)
              VALUES (${id}, ${userId}, ${input.name}, ${input.slug}, ${input.description ?? ""},
                ${input.defaultTextModel ?? null}, ${input.defaultImageModel ?? null}, ${input.defaultProviderSort ?? null},
                ${json(input.ioLoggingApiKeyIds)}, ${input.ioLoggingSamplingRate ?? 1},
                ${bool(input.isDataDiscountLoggingEnabled)}, ${bool(input.isObservabilityBroadcastEnabled)},
                ${bool(input.isObservabilityIoLoggingEnabled)}, ${json(input.disabledServerTools)}, 0, ${userId}, ${now}, ${null})`
            yield* sql`INSERT INTO workspace_members (workspace_id, user_id, role, is_scim, created_at)
              VALUES (${id}, ${userId}, ${"admin"}, 0, ${now})`
            return Option.getOrThrow(yield* loadById(id))
          }),
        )
        .pipe(
          Effect.catchTag("SqlError", (e) =>
            constraintOf(e) === "unique" ? Effect.fail(slugTaken(input.slug)) : Effect.die(e),
          ),
        )

    /**
     * Updates the given fields. Key ids must be the caller's keys or keys in the workspace;
     * the slug stays unique among the owner's workspaces. An empty patch changes nothing.
     */
    const update = (callerId: string, row: WorkspaceRow, patch: WorkspacePatch) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            if (patch.slug !== undefined && (yield* slugInUse(row.owner_user_id, patch.slug, row.id))) {
              return yield* slugTaken(patch.slug)
            }
            yield* checkKeyIds(callerId, patch.ioLoggingApiKeyIds, row.id)
            const sets = []
            if (patch.name !== undefined) sets.push(sql`name = ${patch.name}`)
            if (patch.slug !== undefined) sets.push(sql`slug = ${patch.slug}`)
            if (patch.description !== undefined) sets.push(sql`description = ${patch.description ?? ""}`)
            if (patch.defaultTextModel !== undefined) sets.push(sql`default_text_model = ${patch.defaultTextModel}`)
            if (patch.defaultImageModel !== undefined) sets.push(sql`default_image_model = ${patch.defaultImageModel}`)
            if (patch.defaultProviderSort !== undefined)
              sets.push(sql`default_provider_sort = ${patch.defaultProviderSort}`)
            if (patch.ioLoggingApiKeyIds !== undefined)
              sets.push(sql`io_logging_api_key_ids = ${json(patch.ioLoggingApiKeyIds)}`)
            if (patch.ioLoggingSamplingRate !== undefined)
              sets.push(sql`io_logging_sampling_rate = ${patch.ioLoggingSamplingRate}`)
            if (patch.isDataDiscountLoggingEnabled !== undefined)
              sets.push(sql`is_data_discount_logging_enabled = ${bool(patch.isDataDiscountLoggingEnabled)}`)
            if (patch.isObservabilityBroadcastEnabled !== undefined)
              sets.push(sql`is_observability_broadcast_enabled = ${bool(patch.isObservabilityBroadcastEnabled)}`)
            if (patch.isObservabilityIoLoggingEnabled !== undefined)
              sets.push(sql`is_observability_io_logging_enabled = ${bool(patch.isObservabilityIoLoggingEnabled)}`)
            if (patch.disabledServerTools !== undefined)
              sets.push(sql`disabled_server_tools = ${json(patch.disabledServerTools)}`)
            if (sets.length === 0) return row
            sets.push(sql`updated_at = ${yield* nowIso}`)
            yield* sql`UPDATE workspaces SET ${sql.csv(sets)} WHERE id = ${row.id}`
            return Option.getOrThrow(yield* loadById(row.id))
          }),
        )
        .pipe(
          Effect.catchTag("SqlError", (e) =>
            constraintOf(e) === "unique" && patch.slug !== undefined ? Effect.fail(slugTaken(patch.slug)) : Effect.die(e),
          ),
        )

    /**
     * Deletes a workspace and its memberships. Refused (nothing changes) for the owner's
     * default workspace, and while keys of its members (the owner included) that are not
     * deleted live in it, active or disabled: a member can still use or re-enable them.
     * Keys of users who are no longer members are deleted with the workspace: they cannot
     * authenticate in it nor be re-enabled (Auth and the keys handler check membership), and
     * only their own user could delete them, so otherwise nobody who may delete the workspace
     * could. Deleted keys are tombstones kept for the ledger; they move to the owner's default
     * workspace so the workspace row can go (the spend rows keep the original workspace id).
     * Returns the hashes of the keys deleted here, whose cached rows the caller drops.
     */
    const remove = (row: WorkspaceRow, callerId: string) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            if (row.is_default === 1) {
              return yield* new BadRequest({
                message: `Workspace '${row.slug}' is its owner's default workspace and cannot be deleted (keys created without a workspace_id go there); nothing was deleted`,
              })
            }
            const holders = yield* sql<{ user_id: string; active: number; disabled: number; member: number }>`SELECT k.user_id,
                CAST(SUM(CASE WHEN k.disabled = 0 THEN 1 ELSE 0 END) AS INTEGER) AS active,
                CAST(SUM(CASE WHEN k.disabled = 1 THEN 1 ELSE 0 END) AS INTEGER) AS disabled,
                CASE WHEN k.user_id = ${row.owner_user_id} OR EXISTS (SELECT 1 FROM workspace_members m
                  WHERE m.workspace_id = ${row.id} AND m.user_id = k.user_id) THEN 1 ELSE 0 END AS member
              FROM api_keys k WHERE k.workspace_id = ${row.id} AND k.deleted = 0
              GROUP BY k.user_id ORDER BY k.user_id`
            const members = holders.filter((h) => Number(h.member) === 1)
            if (members.length > 0) {
              // The caller's own keys first: those it can delete itself.
              members.sort((a, b) => Number(b.user_id === callerId) - Number(a.user_id === callerId))
              const shown = members.slice(0, 5).map((h) => {
                const counts = [
                  Number(h.active) > 0 ? plural(Number(h.active), "active API key", "active API keys") : undefined,
                  Number(h.disabled) > 0 ? plural(Number(h.disabled), "disabled API key", "disabled API keys") : undefined,
                ].filter((c) => c !== undefined)
                return `${h.user_id === callerId ? "yours" : h.user_id}: ${counts.join(" and ")}`
              })
              const more = members.length > shown.length ? `; and ${plural(members.length - shown.length, "other member", "other members")}` : ""
              return yield* new BadRequest({
                message: `Workspace '${row.slug}' still has API keys of its members (${shown.join("; ")}${more}). Its admins can disable or delete them (GET /keys?workspace_id=${row.id} lists them); a member whose keys here are all disabled can instead be removed from the workspace, as keys of former members are deleted with it. Nothing was deleted`,
              })
            }
            // By user: a key a member creates meanwhile is not swept along (it fails the delete instead).
            const formerUsers = holders.map((h) => h.user_id)
            const deletedHashes =
              formerUsers.length === 0
                ? []
                : (yield* sql<{ hash: string }>`SELECT hash FROM api_keys
                    WHERE workspace_id = ${row.id} AND deleted = 0 AND user_id IN ${sql.in(formerUsers)}`).map((k) => k.hash)
            if (deletedHashes.length > 0) {
              yield* sql`UPDATE api_keys SET deleted = 1, disabled = 1, updated_at = ${yield* nowIso}
                WHERE hash IN ${sql.in(deletedHashes)}`
            }
            const fallback = yield* users.ensure(row.owner_user_id)
            yield* sql`UPDATE api_keys SET workspace_id = ${fallback} WHERE workspace_id = ${row.id} AND deleted = 1`
            yield* sql`DELETE FROM workspace_members WHERE workspace_id = ${row.id}`
            yield* sql`DELETE FROM workspace_budgets WHERE workspace_id = ${row.id}`
            yield* sql`DELETE FROM workspaces WHERE id = ${row.id}`
            return deletedHashes
          }),
        )
        .pipe(
          Effect.catchTag("SqlError", (e) =>
            constraintOf(e) === "foreign_key"
              ? Effect.fail(
                  new BadRequest({
                    message: `Workspace '${row.slug}' still holds resources that refer to it (such as observability destinations); remove them first. Nothing was deleted`,
                  }),
                )
              : Effect.die(e),
          ),
        )

    const members = (workspaceId: string) =>
      sql<MemberRow>`SELECT * FROM workspace_members WHERE workspace_id = ${workspaceId}
        ORDER BY created_at, user_id`.pipe(Effect.orDie)

    /**
     * Adds users as members (unknown users are created, with their own default workspace).
     * Users already present do not count; they keep their role unless `role` is given, which
     * changes it, all or nothing: refused for the owner (always an admin) and for a member
     * provisioned through SCIM (unless this is the provisioning, `scim`). Returns the
     * memberships of every requested user, in the order asked.
     */
    const addMembers = (workspaceId: string, userIds: ReadonlyArray<string>, options: { role?: MemberRole; scim?: boolean } = {}) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const wanted = [...new Set(userIds)]
            const presentRows = yield* sql<MemberRow>`SELECT * FROM workspace_members
                WHERE workspace_id = ${workspaceId} AND user_id IN ${sql.in(wanted)}`
            const present = new Set(presentRows.map((r) => r.user_id))
            const { role } = options
            const changing = role === undefined ? [] : presentRows.filter((m) => m.role !== role)
            if (changing.length > 0) {
              const owner = (yield* sql<{ owner_user_id: string }>`SELECT owner_user_id FROM workspaces WHERE id = ${workspaceId}`)[0]?.owner_user_id
              const refused = changing.flatMap((m) =>
                m.user_id === owner
                  ? [{ user_id: m.user_id, reason: "owns the workspace (the owner is always an admin)" }]
                  : Number(m.is_scim) === 1 && options.scim !== true
                    ? [{ user_id: m.user_id, reason: "is provisioned through SCIM (make this change in the identity provider)" }]
                    : [],
              )
              if (refused.length > 0) {
                return yield* new BadRequest({
                  message: `No member was added or changed: ${refused.map((r) => `${r.user_id} ${r.reason}`).join("; ")}`,
                  metadata: { refused },
                })
              }
              yield* sql`UPDATE workspace_members SET role = ${role} WHERE workspace_id = ${workspaceId}
                AND user_id IN ${sql.in(changing.map((m) => m.user_id))}`
            }
            const now = yield* nowIso
            let added = 0
            for (const userId of wanted) {
              if (present.has(userId)) continue
              yield* users.ensure(userId)
              yield* sql`INSERT INTO workspace_members (workspace_id, user_id, role, is_scim, created_at)
                VALUES (${workspaceId}, ${userId}, ${options.role ?? "member"}, ${bool(options.scim)}, ${now})
                ON CONFLICT (workspace_id, user_id) DO NOTHING`
              added++
            }
            const rows = yield* sql<MemberRow>`SELECT * FROM workspace_members
              WHERE workspace_id = ${workspaceId} AND user_id IN ${sql.in(wanted)}`
            const byUser = new Map(rows.map((r) => [r.user_id, r]))
            return {
              added,
              members: wanted.flatMap((u) => {
                const r = byUser.get(u)
                return r === undefined ? [] : [r]
              }),
            }
          }),
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    /**
     * Removes members, all or nothing. Refused: the owner (always a member), a member
     * provisioned through SCIM, a member with active keys (not disabled, not deleted) in the
     * workspace. When any is refused nobody is removed and the message names each refusal.
     * Users who are not members are not removed and do not count.
     */
    const removeMembers = (row: WorkspaceRow, userIds: ReadonlyArray<string>) =>
      sql
        .withTransaction(
          Effect.gen(function* () {
            const wanted = [...new Set(userIds)]
            const present = yield* sql<MemberRow>`SELECT * FROM workspace_members
              WHERE workspace_id = ${row.id} AND user_id IN ${sql.in(wanted)}`
            const presentByUser = new Map(present.map((m) => [m.user_id, m]))
            // Active: neither disabled nor past its expiry (read here, as authentication reads it).
            const activeKeys = new Map<string, number>()
            const now = Date.now()
            for (const k of yield* sql<{ user_id: string; expires_at: string | null }>`SELECT user_id, expires_at FROM api_keys
                WHERE workspace_id = ${row.id} AND disabled = 0 AND deleted = 0 AND user_id IN ${sql.in(wanted)}`) {
              if (!hasExpired(k.expires_at, now)) activeKeys.set(k.user_id, (activeKeys.get(k.user_id) ?? 0) + 1)
            }
            const refused: Array<{ user_id: string; reasons: Array<string> }> = []
            for (const userId of wanted) {
              const member = presentByUser.get(userId)
              const reasons: Array<string> = []
              if (userId === row.owner_user_id) reasons.push("owns the workspace (the owner is always a member)")
              if (member !== undefined && Number(member.is_scim) === 1) {
                reasons.push("is provisioned through SCIM (make this change in the identity provider)")
              }
              const keys = activeKeys.get(userId) ?? 0
              if (member !== undefined && keys > 0) {
                reasons.push(
                  `has ${plural(keys, "active API key", "active API keys")} in this workspace (disable or delete ${keys === 1 ? "it" : "them"} first)`,
                )
              }
              if (reasons.length > 0) refused.push({ user_id: userId, reasons })
            }
            if (refused.length > 0) {
              return yield* new BadRequest({
                message: `No member was removed: ${refused.map((r) => `${r.user_id} ${r.reasons.join(" and ")}`).join("; ")}`,
                metadata: { refused },
              })
            }
            const removable = wanted.filter((u) => presentByUser.has(u))
            if (removable.length > 0) {
              yield* sql`DELETE FROM workspace_members WHERE workspace_id = ${row.id} AND user_id IN ${sql.in(removable)}`
            }
            return removable.length
          }),
        )
        .pipe(Effect.catchTag("SqlError", Effect.die))

    /** Marks a membership as SCIM-provisioned (or not). False when the user is not a member. */
    const setScim = (workspaceId: string, userId: string, on: boolean) =>
      Effect.gen(function* () {
        const rows = yield* sql<{ user_id: string }>`SELECT user_id FROM workspace_members
          WHERE workspace_id = ${workspaceId} AND user_id = ${userId}`
        if (rows.length === 0) return false
        yield* sql`UPDATE workspace_members SET is_scim = ${bool(on)}
          WHERE workspace_id = ${workspaceId} AND user_id = ${userId}`
        return true
      }).pipe(Effect.orDie)

    /** The wire object of a workspace. */
    const view = (row: WorkspaceRow): Workspace => ({
      id: row.id,
      name: row.name,
      slug: row.slug,
      description: row.description,
      default_text_model: row.default_text_model,
      default_image_model: row.default_image_model,
      default_provider_sort: row.default_provider_sort,
      io_logging_api_key_ids: parseArray<number>(row.io_logging_api_key_ids),
      io_logging_sampling_rate: Number(row.io_logging_sampling_rate),
      is_data_discount_logging_enabled: Number(row.is_data_discount_logging_enabled) === 1,
      is_observability_broadcast_enabled: Number(row.is_observability_broadcast_enabled) === 1,
      is_observability_io_logging_enabled: Number(row.is_observability_io_logging_enabled) === 1,
      disabled_server_tools: parseArray<string>(row.disabled_server_tools),
      default_guardrail_id: `gr_${row.id}`,
      created_at: row.created_at,
      created_by: row.created_by,
      updated_at: row.updated_at,
      is_default: Number(row.is_default) === 1,
    })

    /** The wire object of a membership. */
    const memberView = (m: MemberRow): Member => ({
      id: memberIdOf(m.workspace_id, m.user_id),
      workspace_id: m.workspace_id,
      user_id: m.user_id,
      role: m.role,
      created_at: m.created_at,
      is_scim: Number(m.is_scim) === 1,
    })

    return {
      list,
      findForUser,
      findAny,
      create,
      update,
      remove,
      members,
      addMembers,
      removeMembers,
      setScim,
      view,
      memberView,
    } as const
  }),
  dependencies: [Users.Default],
}) {}
