import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { WorkspaceStore } from "../../src/services/WorkspaceStore.js"
import { engine } from "../support/db.js"
import { expectError, startTestGateway, type TestGateway, useGateway } from "../support/gateway.js"
import { expectShape } from "../support/shapes.js"

const gw = useGateway()

/** Wire-compat's member object. */
const MEMBER = {
  id: ["string"],
  workspace_id: ["string"],
  user_id: ["string"],
  role: ["string"],
  created_at: ["zoned"],
} as const

interface MemberBody {
  id: string
  workspace_id: string
  user_id: string
  role: "admin" | "member"
  created_at: string
  is_scim: boolean
}

let counter = 0
const unique = (prefix: string) => `${prefix}-${++counter}-${Math.random().toString(36).slice(2, 8)}`

const createWs = async (key?: string, g: () => TestGateway = gw) => {
  const res = await g().fetch("/v1/workspaces", { method: "POST", json: { name: "Team", slug: unique("team") }, key })
  expect(res.status).toBe(201)
  return ((await res.json()) as { data: { id: string; slug: string } }).data
}

const listMembers = async (ref: string, key?: string) => {
  const res = await gw().fetch(`/v1/workspaces/${ref}/members`, { key })
  expect(res.status).toBe(200)
  return ((await res.json()) as { data: Array<MemberBody> }).data
}

const memberIds = async (ref: string, key?: string) => (await listMembers(ref, key)).map((m) => m.user_id).sort()

const add = (ref: string, json: unknown, key?: string | null) =>
  gw().fetch(`/v1/workspaces/${ref}/members/add`, { method: "POST", json, key })

const remove = (ref: string, json: unknown, key?: string | null, g: () => TestGateway = gw) =>
  g().fetch(`/v1/workspaces/${ref}/members/remove`, { method: "POST", json, key })

const me = async () => ((await (await gw().fetch("/v1/key")).json()) as { data: { creator_user_id: string } }).data.creator_user_id

const run = <A>(effect: Effect.Effect<A, unknown, KeyStore | Users | WorkspaceStore | SqlClient.SqlClient>) =>
  gw().server.runtime.runPromise(effect as Effect.Effect<A>)

/** A second user with its own management key. */
const otherUser = (userId: string) =>
  run(
    Effect.gen(function* () {
      const workspaceId = yield* (yield* Users).ensure(userId)
      const { secret } = yield* (yield* KeyStore).create({ userId, workspaceId, name: "admin", isManagement: true })
      return { userId, workspaceId, secret }
    }),
  )

/** A key of `userId` in `workspaceId`, through the store. */
const keyIn = (userId: string, workspaceId: string) =>
  run(Effect.map(Effect.flatMap(KeyStore, (keys) => keys.create({ userId, workspaceId, name: "member key" })), ({ row }) => row))

const setScim = (workspaceId: string, userId: string, on: boolean) =>
  run(Effect.flatMap(WorkspaceStore, (s) => s.setScim(workspaceId, userId, on)))

const inferenceKey = async () =>
  ((await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "inference" } })).json()) as { key: string }).key

const ids = (n: number, prefix: string) => Array.from({ length: n }, (_, i) => `${prefix}_${i}`)

describe("GET /workspaces/{id}/members", () => {
  test("answers {data: [member]} with every required key; the creator is an admin", async () => {
    const ws = await createWs()
    const data = await listMembers(ws.id)
    expect(data).toHaveLength(1)
    expectShape(data[0], MEMBER)
    expect(data[0]).toMatchObject({ workspace_id: ws.id, user_id: await me(), role: "admin", is_scim: false })
    expect(await listMembers(ws.slug)).toEqual(data)
  })

  test("an unknown workspace is 404; no credential is 401; an inference key is 403", async () => {
    await expectError(await gw().fetch("/v1/workspaces/no-such/members"), 404)
    const ws = await createWs()
    await expectError(await gw().fetch(`/v1/workspaces/${ws.id}/members`, { key: null }), 401)
    expect(await expectError(await gw().fetch(`/v1/workspaces/${ws.id}/members`, { key: await inferenceKey() }), 403)).toBe(
      "Only management keys can perform this operation",
    )
  })
})

describe("POST /workspaces/{id}/members/add", () => {
  test("answers 200 {added_count, data: [member]}; new members have the member role", async () => {
    const ws = await createWs()
    const res = await add(ws.id, { user_ids: ["user_add_a", "user_add_b"] })
    expect(res.status).toBe(200)
    const body = (await res.json()) as { added_count: number; data: Array<MemberBody> }
    expect(body.added_count).toBe(2)
    expect(body.data.map((m) => m.user_id)).toEqual(["user_add_a", "user_add_b"])
    for (const m of body.data) {
      expectShape(m, MEMBER)
      expect(m).toMatchObject({ workspace_id: ws.id, role: "member", is_scim: false })
    }
    expect(await memberIds(ws.id)).toEqual([await me(), "user_add_a", "user_add_b"].sort())
  })

  test("a member already present, or named twice, counts once; without a role, existing members keep theirs", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_twice"], role: "admin" })
    const res = await add(ws.slug, { user_ids: ["user_twice", await me(), "user_new", "user_new"] })
    const body = (await res.json()) as { added_count: number; data: Array<MemberBody> }
    expect(body.added_count).toBe(1)
    expect(body.data.map((m) => [m.user_id, m.role])).toEqual([
      ["user_twice", "admin"],
      [await me(), "admin"],
      ["user_new", "member"],
    ])
    expect((await listMembers(ws.id)).length).toBe(3)
  })

  test("a role given changes the role of members already present: promoted, then demoted, counted as none added", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_promoted"] })
    const promoted = (await (await add(ws.id, { user_ids: ["user_promoted", await me()], role: "admin" })).json()) as { added_count: number; data: Array<MemberBody> }
    expect(promoted.added_count).toBe(0)
    expect(promoted.data.map((m) => [m.user_id, m.role])).toEqual([["user_promoted", "admin"], [await me(), "admin"]])
    expect(await run(Effect.flatMap(Users, (u) => u.roleIn("user_promoted", ws.id)))).toBe("admin")
    await add(ws.id, { user_ids: ["user_promoted"], role: "member" })
    expect(await run(Effect.flatMap(Users, (u) => u.roleIn("user_promoted", ws.id)))).toBe("member")
  })

  test("the owner's role and a SCIM member's are not changed here: 400 naming them, nothing changed or added", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_idp", "user_plain_role"] })
    await setScim(ws.id, "user_idp", true)
    const res = await add(ws.id, { user_ids: [await me(), "user_idp", "user_plain_role", "user_not_yet"], role: "admin" })
    const message = await expectError(res, 400)
    expect(message).toMatch(/^No member was added or changed: /)
    expect(message).toContain("user_idp is provisioned through SCIM")
    const demote = await expectError(await add(ws.id, { user_ids: [await me()], role: "member" }), 400)
    expect(demote).toContain(`${await me()} owns the workspace (the owner is always an admin)`)
    expect((await listMembers(ws.id)).map((m) => [m.user_id, m.role]).sort()).toEqual(
      [[await me(), "admin"], ["user_idp", "member"], ["user_plain_role", "member"]].sort(),
    )
  })

  test("an admin governs members' keys: lists, disables and deletes them; then demotes or removes the member and deletes the workspace", async () => {
    const ws = await createWs()
    const member = await otherUser(unique("user_rogue"))
    await add(ws.id, { user_ids: [member.userId], role: "admin" })
    const created = await gw().fetch("/v1/keys", { method: "POST", json: { name: "rogue key", workspace_id: ws.id }, key: member.secret })
    expect(created.status).toBe(201)
    const hash = ((await created.json()) as { data: { hash: string } }).data.hash
    // The owner sees it in the workspace's list (not in its own), reads it and disables it.
    const listed = (await (await gw().fetch(`/v1/keys?workspace_id=${ws.id}`)).json()) as { data: Array<{ hash: string }> }
    expect(listed.data.map((k) => k.hash)).toContain(hash)
    const own = (await (await gw().fetch("/v1/keys")).json()) as { data: Array<{ hash: string }> }
    expect(own.data.map((k) => k.hash)).not.toContain(hash)
    expect((await gw().fetch(`/v1/keys/${hash}`)).status).toBe(200)
    const disabled = await gw().fetch(`/v1/keys/${hash}`, { method: "PATCH", json: { disabled: true } })
    expect(((await disabled.json()) as { data: { disabled: boolean } }).data.disabled).toBe(true)
    await add(ws.id, { user_ids: [member.userId], role: "member" })
    expect(await run(Effect.flatMap(Users, (u) => u.roleIn(member.userId, ws.id)))).toBe("member")
    expect(await (await remove(ws.id, { user_ids: [member.userId] })).json()).toEqual({ removed_count: 1 })
    // A former member's key is still the workspace's to govern.
    expect(await (await gw().fetch(`/v1/keys/${hash}`, { method: "DELETE" })).json()).toEqual({ deleted: true })
    expect((await gw().fetch(`/v1/workspaces/${ws.id}`, { method: "DELETE" })).status).toBe(200)
  })

  test("a plain member cannot reach another member's key (404), nor list the workspace's keys beyond their own", async () => {
    const other = await otherUser(unique("user_head"))
    const ws = await createWs(other.secret)
    await add(ws.id, { user_ids: [await me()] }, other.secret)
    const theirs = await gw().fetch("/v1/keys", { method: "POST", json: { name: "head key", workspace_id: ws.id }, key: other.secret })
    const hash = ((await theirs.json()) as { data: { hash: string } }).data.hash
    await expectError(await gw().fetch(`/v1/keys/${hash}`), 404)
    await expectError(await gw().fetch(`/v1/keys/${hash}`, { method: "PATCH", json: { disabled: true } }), 404)
    await expectError(await gw().fetch(`/v1/keys/${hash}`, { method: "DELETE" }), 404)
    const listed = (await (await gw().fetch(`/v1/keys?workspace_id=${ws.id}`)).json()) as { data: Array<{ hash: string }> }
    expect(listed.data.map((k) => k.hash)).not.toContain(hash)
  })

  test("unknown users are created as users", async () => {
    const ws = await createWs()
    const fresh = unique("user_fresh")
    await add(ws.id, { user_ids: [fresh] })
    const rows = await run(Effect.flatMap(SqlClient.SqlClient, (sql) => sql<{ id: string }>`SELECT id FROM users WHERE id = ${fresh}`))
    expect(rows.map((r) => r.id)).toEqual([fresh])
    expect(await run(Effect.flatMap(Users, (u) => u.canUseWorkspace(fresh, ws.id)))).toBe(true)
  })

  test("user_ids of 1 and 100 elements are accepted; 0, 101, missing, an empty id and a non-array are 400 naming user_ids", async () => {
    const ws = await createWs()
    expect(((await (await add(ws.id, { user_ids: ["user_one"] })).json()) as { added_count: number }).added_count).toBe(1)
    const hundred = await add(ws.id, { user_ids: ids(100, unique("user_h")) })
    expect(hundred.status).toBe(200)
    expect(((await hundred.json()) as { added_count: number }).added_count).toBe(100)
    const before = await memberIds(ws.id)
    for (const json of [{ user_ids: [] }, { user_ids: ids(101, "user_over") }, {}, { user_ids: [""] }, { user_ids: "user_a" }, { user_ids: [5] }]) {
      expect(await expectError(await add(ws.id, json), 400)).toContain("user_ids")
    }
    expect(await expectError(await add(ws.id, { user_ids: ["x"], role: "owner" }), 400)).toContain("role")
    expect(await memberIds(ws.id)).toEqual(before)
  })

  test("an unknown workspace is 404; an inference key is 403 and adds nobody", async () => {
    await expectError(await add("no-such", { user_ids: ["user_a"] }), 404)
    const ws = await createWs()
    await expectError(await add(ws.id, { user_ids: ["user_sneak"] }, await inferenceKey()), 403)
    await expectError(await add(ws.id, { user_ids: ["user_sneak"] }, null), 401)
    expect(await memberIds(ws.id)).toEqual([await me()])
  })
})

describe("POST /workspaces/{id}/members/remove", () => {
  test("answers 200 {removed_count} (not wrapped in data) and removes them", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_r1", "user_r2", "user_r3"] })
    const res = await remove(ws.id, { user_ids: ["user_r1", "user_r2"] })
    expect(res.status).toBe(200)
    expect(await res.json()).toEqual({ removed_count: 2 })
    expect(await memberIds(ws.id)).toEqual([await me(), "user_r3"].sort())
  })

  test("the path may be the slug", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_by_slug"] })
    expect(await (await remove(ws.slug, { user_ids: ["user_by_slug"] })).json()).toEqual({ removed_count: 1 })
  })

  test("users who are not members are not removed and do not count; a repeated id counts once", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_real"] })
    const res = await remove(ws.id, { user_ids: ["user_real", "user_real", "user_ghost", "user_never"] })
    expect(await res.json()).toEqual({ removed_count: 1 })
    expect(await (await remove(ws.id, { user_ids: ["user_real"] })).json()).toEqual({ removed_count: 0 })
  })

  test("user_ids of 1 and 100 elements are accepted; 0, 101, missing and an empty id are 400 naming user_ids", async () => {
    const ws = await createWs()
    const many = ids(100, unique("user_m"))
    await add(ws.id, { user_ids: many })
    for (const json of [{ user_ids: [] }, { user_ids: ids(101, "user_over") }, {}, { user_ids: [""] }, { user_ids: null }]) {
      expect(await expectError(await remove(ws.id, json), 400)).toContain("user_ids")
    }
    expect((await memberIds(ws.id)).length).toBe(101)
    expect(await (await remove(ws.id, { user_ids: [many[0]] })).json()).toEqual({ removed_count: 1 })
    expect(await (await remove(ws.id, { user_ids: many })).json()).toEqual({ removed_count: 99 })
    expect(await memberIds(ws.id)).toEqual([await me()])
  })

  test("a member with active keys in the workspace is refused; nobody is removed and the message says who and why", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_keyed", "user_free"] })
    const key = await keyIn("user_keyed", ws.id)
    const message = await expectError(await remove(ws.id, { user_ids: ["user_free", "user_keyed"] }), 400)
    expect(message).toContain("No member was removed")
    expect(message).toContain("user_keyed")
    expect(message).toContain("1 active API key in this workspace")
    expect(message).not.toContain("user_free")
    expect(await memberIds(ws.id)).toEqual([await me(), "user_free", "user_keyed"].sort())
    // A disabled key is not active: the member can go now.
    await run(Effect.flatMap(KeyStore, (keys) => keys.update(key.hash, { disabled: true })))
    expect(await (await remove(ws.id, { user_ids: ["user_free", "user_keyed"] })).json()).toEqual({ removed_count: 2 })
  })

  test("an expired key is not active: it holds no member (it was counted, though every call with it was a 401)", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_expired_key", "user_later_key"] })
    const past = new Date(Date.now() - 60_000)
    // The offset as a client may write it: compared as a time, not as text.
    const pastWithOffset = `${new Date(past.getTime() + 2 * 3_600_000).toISOString().slice(0, 19)}+02:00`
    await run(Effect.flatMap(KeyStore, (keys) => keys.create({ userId: "user_expired_key", workspaceId: ws.id, name: "expired", expiresAt: pastWithOffset })))
    await run(Effect.flatMap(KeyStore, (keys) => keys.create({ userId: "user_later_key", workspaceId: ws.id, name: "later", expiresAt: new Date(Date.now() + 3_600_000).toISOString() })))
    expect(await expectError(await remove(ws.id, { user_ids: ["user_later_key"] }), 400)).toContain("1 active API key")
    expect(await (await remove(ws.id, { user_ids: ["user_expired_key"] })).json()).toEqual({ removed_count: 1 })
  })

  test("active keys in another workspace do not hold the member; deleted keys do not either", async () => {
    const ws = await createWs()
    const elsewhere = await createWs()
    await add(ws.id, { user_ids: ["user_elsewhere"] })
    await add(elsewhere.id, { user_ids: ["user_elsewhere"] })
    await keyIn("user_elsewhere", elsewhere.id)
    const gone = await keyIn("user_elsewhere", ws.id)
    await run(Effect.flatMap(KeyStore, (keys) => keys.remove(gone.hash)))
    expect(await (await remove(ws.id, { user_ids: ["user_elsewhere"] })).json()).toEqual({ removed_count: 1 })
  })

  test("a SCIM-provisioned member is refused; nobody is removed and the message says to use the identity provider", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_scim", "user_plain"] })
    expect(await setScim(ws.id, "user_scim", true)).toBe(true)
    expect((await listMembers(ws.id)).find((m) => m.user_id === "user_scim")?.is_scim).toBe(true)
    const message = await expectError(await remove(ws.id, { user_ids: ["user_plain", "user_scim"] }), 400)
    expect(message).toContain("No member was removed")
    expect(message).toContain("user_scim")
    expect(message).toContain("SCIM")
    expect(message).toContain("identity provider")
    expect(await memberIds(ws.id)).toEqual([await me(), "user_plain", "user_scim"].sort())
    await setScim(ws.id, "user_scim", false)
    expect(await (await remove(ws.id, { user_ids: ["user_plain", "user_scim"] })).json()).toEqual({ removed_count: 2 })
  })

  test("both refusals at once: the message names each refused member and its reason; nobody is removed", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_both_keys", "user_both_scim", "user_both_ok"] })
    await keyIn("user_both_keys", ws.id)
    await keyIn("user_both_keys", ws.id)
    await setScim(ws.id, "user_both_scim", true)
    const res = await remove(ws.id, { user_ids: ["user_both_ok", "user_both_keys", "user_both_scim", "user_not_member"] })
    const message = await expectError(res.clone(), 400)
    expect(message).toMatch(/^No member was removed: /)
    expect(message).toContain("user_both_keys has 2 active API keys in this workspace")
    expect(message).toContain("user_both_scim is provisioned through SCIM")
    const body = (await res.json()) as { error: { metadata?: { refused?: Array<{ user_id: string }> } } }
    expect(body.error.metadata?.refused?.map((r) => r.user_id)).toEqual(["user_both_keys", "user_both_scim"])
    expect(await memberIds(ws.id)).toEqual([await me(), "user_both_keys", "user_both_ok", "user_both_scim"].sort())
  })

  test("the owner is always a member and cannot be removed", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_beside_owner"] })
    const message = await expectError(await remove(ws.id, { user_ids: [await me(), "user_beside_owner"] }), 400)
    expect(message).toContain(`${await me()} owns the workspace`)
    expect(message).toContain("No member was removed")
    expect(await memberIds(ws.id)).toEqual([await me(), "user_beside_owner"].sort())
  })

  test("an admin who is not the owner can remove members, but not the owner", async () => {
    const other = await otherUser(unique("user_owner"))
    const ws = await createWs(other.secret)
    await add(ws.id, { user_ids: [await me()], role: "admin" }, other.secret)
    await add(ws.id, { user_ids: ["user_by_admin"] }, other.secret)
    expect(await (await remove(ws.id, { user_ids: ["user_by_admin"] })).json()).toEqual({ removed_count: 1 })
    expect(await expectError(await remove(ws.id, { user_ids: [other.userId] }), 400)).toContain("owns the workspace")
  })

  test("a plain member cannot remove anyone (403); another user's workspace is 404; nothing changes", async () => {
    const other = await otherUser(unique("user_lead"))
    const ws = await createWs(other.secret)
    await add(ws.id, { user_ids: [await me(), "user_victim"] }, other.secret)
    expect(await expectError(await remove(ws.id, { user_ids: ["user_victim"] }), 403)).toContain("admins")
    const privateWs = await createWs(other.secret)
    await add(privateWs.id, { user_ids: ["user_victim"] }, other.secret)
    await expectError(await remove(privateWs.id, { user_ids: ["user_victim"] }), 404)
    await expectError(await remove(privateWs.slug, { user_ids: ["user_victim"] }), 404)
    expect(await memberIds(ws.id, other.secret)).toEqual([other.userId, await me(), "user_victim"].sort())
    expect(await memberIds(privateWs.id, other.secret)).toEqual([other.userId, "user_victim"].sort())
  })

  test("no credential is 401; an inference key is 403 with the management message", async () => {
    const ws = await createWs()
    await add(ws.id, { user_ids: ["user_stay"] })
    await expectError(await remove(ws.id, { user_ids: ["user_stay"] }, null), 401)
    expect(await expectError(await remove(ws.id, { user_ids: ["user_stay"] }, await inferenceKey()), 403)).toBe(
      "Only management keys can perform this operation",
    )
    expect(await memberIds(ws.id)).toContain("user_stay")
  })
})

describe("gateway members (CLI): the SCIM flag is set outside the API", () => {
  // A gateway on a database another process can open: a file for SQLite, its own database for Postgres.
  const root = join(import.meta.dir, "..", "..")
  const dir = mkdtempSync(join(tmpdir(), "gw-members-"))
  let g: Awaited<ReturnType<typeof startTestGateway>>
  beforeAll(async () => {
    g = await startTestGateway(engine === "sqlite" ? { databaseUrl: join(dir, "members.db") } : {})
  })
  afterAll(async () => {
    await g?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  const cli = (args: Array<string>) => {
    const proc = Bun.spawnSync([process.execPath, "src/main.ts", "members", ...args], {
      cwd: root,
      env: { ...process.env, DATABASE_URL: g.server.settings.databaseUrl, GATEWAY_DATA_DIR: dir, GATEWAY_LOG_LEVEL: "none" },
    })
    return { code: proc.exitCode, out: proc.stdout.toString(), err: proc.stderr.toString() }
  }

  test("members add --scim marks the member; the API then refuses to remove it until set-scim --off", async () => {
    const ws = await createWs(undefined, () => g)
    const added = cli(["add", "--workspace", ws.id, "--user", "user_idp", "--scim"])
    expect(added.code).toBe(0)
    expect(added.out).toContain("Added: user_idp  member  scim")
    expect(cli(["list", "--workspace", ws.slug]).out).toContain("user_idp  member  scim")
    expect(await expectError(await remove(ws.id, { user_ids: ["user_idp"] }, undefined, () => g), 400)).toContain("SCIM")
    const off = cli(["set-scim", "--workspace", ws.id, "--user", "user_idp", "--off"])
    expect(off.code).toBe(0)
    expect(off.out).toContain("SCIM off")
    expect(cli(["list", "--workspace", ws.id]).out).toContain("user_idp  member  not-scim")
    expect(await (await remove(ws.id, { user_ids: ["user_idp"] }, undefined, () => g)).json()).toEqual({ removed_count: 1 })
  })

  test("set-scim --on marks an existing member", async () => {
    const ws = await createWs(undefined, () => g)
    expect(cli(["add", "--workspace", ws.id, "--user", "user_later"]).out).toContain("not-scim")
    expect(cli(["set-scim", "--workspace", ws.id, "--user", "user_later", "--on"]).code).toBe(0)
    expect(await expectError(await remove(ws.id, { user_ids: ["user_later"] }, undefined, () => g), 400)).toContain(
      "user_later is provisioned through SCIM",
    )
  })

  test("refusals exit non-zero with one line: unknown workspace, not a member, neither or both of --on/--off", async () => {
    const ws = await createWs(undefined, () => g)
    const unknown = cli(["add", "--workspace", "no-such-workspace", "--user", "u"])
    expect(unknown.code).not.toBe(0)
    expect(unknown.err).toContain("no workspace no-such-workspace")
    const stranger = cli(["set-scim", "--workspace", ws.id, "--user", "user_stranger", "--on"])
    expect(stranger.code).not.toBe(0)
    expect(stranger.err).toContain("not a member")
    expect(cli(["set-scim", "--workspace", ws.id, "--user", "user_x"]).code).not.toBe(0)
    expect(cli(["set-scim", "--workspace", ws.id, "--user", "user_x", "--on", "--off"]).code).not.toBe(0)
  })
})
