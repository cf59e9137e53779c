/**
 * Users and their default workspace. Every key belongs to a user (its creator) and a
 * workspace; a user gets a default workspace the first time it is seen.
 */
import { SqlClient } from "@effect/sql"
import { Clock, Effect } from "effect"

export interface UserRow {
  readonly id: string
  readonly created_at: string
}

export const newUserId = () => `user_${crypto.randomUUID().replaceAll("-", "").slice(0, 24)}`

export class Users extends Effect.Service<Users>()("Users", {
  effect: Effect.gen(function* () {
    const sql = yield* SqlClient.SqlClient

    /** The user's default workspace id, creating the user and the workspace when missing. */
    const ensure = (userId: string) =>
      Effect.gen(function* () {
        const existing = yield* sql<{ id: string }>`
          SELECT id FROM workspaces WHERE owner_user_id = ${userId} AND is_default = 1`
        if (existing[0] !== undefined) return existing[0].id
        const now = new Date(yield* Clock.currentTimeMillis).toISOString()
        const workspaceId = crypto.randomUUID()
        yield* sql.withTransaction(
          Effect.gen(function* () {
            yield* sql`INSERT INTO users (id, created_at) VALUES (${userId}, ${now}) ON CONFLICT (id) DO NOTHING`
            yield* sql`INSERT INTO workspaces (id, owner_user_id, name, slug, description, is_default, created_by, created_at)
              VALUES (${workspaceId}, ${userId}, ${"Default"}, ${"default"}, ${""}, 1, ${userId}, ${now})`
            yield* sql`INSERT INTO workspace_members (workspace_id, user_id, role, is_scim, created_at)
              VALUES (${workspaceId}, ${userId}, ${"admin"}, 0, ${now})`
          }),
        )
        return workspaceId
      }).pipe(Effect.orDie)

    /** The user's role in the workspace: the owner and admin members administer it; undefined when it is not theirs to use. */
    const roleIn = (userId: string, workspaceId: string) =>
      sql<{ owner_user_id: string; role: string | null }>`
        SELECT w.owner_user_id, m.role FROM workspaces w
        LEFT JOIN workspace_members m ON m.workspace_id = w.id AND m.user_id = ${userId}
        WHERE w.id = ${workspaceId}`.pipe(
        Effect.map((rows): "admin" | "member" | undefined => {
          const row = rows[0]
          if (row === undefined) return undefined
          if (row.owner_user_id === userId || row.role === "admin") return "admin"
          return row.role === null ? undefined : "member"
        }),
        Effect.orDie,
      )

    /** Whether the user may use the workspace (owner or member). */
    const canUseWorkspace = (userId: string, workspaceId: string) => Effect.map(roleIn(userId, workspaceId), (role) => role !== undefined)

    return { ensure, canUseWorkspace, roleIn } as const
  }),
}) {}
