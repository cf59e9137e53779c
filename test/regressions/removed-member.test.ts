/**
 * REVIEW (tenancy): removing a member only refuses when the member has ACTIVE keys in the
 * workspace (WorkspaceStore.removeMembers). A disabled key survives the removal, and its owner
 * can re-enable it afterwards (keys.update checks only `user_id`, Auth never checks membership).
 * The removed user then acts inside the other user's workspace again: inference billed and
 * logged in it, and (management key) an observability destination created in it, which receives
 * the workspace's generation traces, the owner's included.
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { KeyStore } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

describe("a removed workspace member", () => {
  test("cannot get back into the workspace by re-enabling a key it disabled before the removal", async () => {
    // User B, with its own management key in its own default workspace.
    const bSecret = await gw().server.runtime.runPromise(
      Effect.gen(function* () {
        const users = yield* Users
        const keys = yield* KeyStore
        const ws = yield* users.ensure("user_bob")
        return (yield* keys.create({ userId: "user_bob", workspaceId: ws, name: "bob-admin", isManagement: true })).secret
      }),
    )
    // A (the admin key) creates workspace X and adds B.
    const x = (await (await gw().fetch("/v1/workspaces", { method: "POST", json: { name: "Team X", slug: "team-x" } })).json()) as {
      data: { id: string }
    }
    const add = await gw().fetch(`/v1/workspaces/${x.data.id}/members/add`, { method: "POST", json: { user_ids: ["user_bob"] } })
    expect(add.status).toBe(200)
    // B makes a management key in X, then disables it so that the removal is allowed.
    const inX = (await (
      await gw().fetch("/v1/keys", {
        method: "POST",
        key: bSecret,
        json: { name: "bob-in-x", workspace_id: x.data.id, is_management_key: true },
      })
    ).json()) as { key: string; data: { hash: string; workspace_id: string } }
    expect(inX.data.workspace_id).toBe(x.data.id)
    await gw().fetch(`/v1/keys/${inX.data.hash}`, { method: "PATCH", key: bSecret, json: { disabled: true } })
    const removed = await gw().fetch(`/v1/workspaces/${x.data.id}/members/remove`, {
      method: "POST",
      json: { user_ids: ["user_bob"] },
    })
    expect(((await removed.json()) as { removed_count: number }).removed_count).toBe(1)
    // B is no longer a member: X does not exist for B.
    expect((await gw().fetch(`/v1/workspaces/${x.data.id}`, { key: bSecret })).status).toBe(404)

    // B re-enables the key...
    const reenable = await gw().fetch(`/v1/keys/${inX.data.hash}`, { method: "PATCH", key: bSecret, json: { disabled: false } })
    // ...and uses workspace X again.
    const inference = await gw().fetch("/v1/responses", {
      method: "POST",
      key: inX.key,
      json: { model: "demo/echo", input: "hi", provider: { order: ["fake"] } },
    })
    const destination = await gw().fetch("/v1/observability/destinations", {
      method: "POST",
      key: inX.key,
      json: { name: "bob's sink", type: "webhook", config: { url: "https://bob.example/hook" } },
    })
    const created = (await destination.json()) as { data?: { workspace_id: string } }
    // Expected: a removed member can no longer act in X (re-enable refused, or the key refused).
    expect(inference.status === 200 && reenable.status === 200).toBe(false)
    expect(created.data?.workspace_id).not.toBe(x.data.id)
  })
})
