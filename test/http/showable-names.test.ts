/**
 * Names people read in the console and in log lines (a key's, a workspace's, a destination's, a new
 * member's user id) are not blank and hold no control characters or bidirectional overrides, which
 * hide text or make one name read as another: 400 naming the field, nothing made. Other Unicode
 * (accents, emoji, other scripts) is kept.
 */
import { describe, expect, test } from "bun:test"
import { expectError, useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const BAD: ReadonlyArray<readonly [string, string]> = [
  ["   ", "must not be blank"],
  ["tab\there", "must not contain control characters"],
  ["nul\u0000", "must not contain control characters"],
  ["admin\u202etxt.exe", "must not contain control characters or bidirectional overrides"],
]

describe("names people read", () => {
  test("a key's name", async () => {
    for (const [name, rule] of BAD) {
      expect(await expectError(await gw().fetch("/v1/keys", { method: "POST", json: { name } }), 400)).toContain(`name: ${rule}`)
    }
    expect((await gw().fetch("/v1/keys", { method: "POST", json: { name: "Équipe 🚀 日本" } })).status).toBe(201)
  })

  test("a workspace's name", async () => {
    for (const [name, rule] of BAD) {
      const res = await gw().fetch("/v1/workspaces", { method: "POST", json: { name, slug: `s-${Math.random().toString(36).slice(2, 8)}` } })
      expect(await expectError(res, 400)).toContain(`name: ${rule}`)
    }
  })

  test("a destination's name", async () => {
    for (const [name, rule] of BAD) {
      const res = await gw().fetch("/v1/observability/destinations", {
        method: "POST",
        json: { name, type: "webhook", config: { url: "https://hooks.example.com/x" } },
      })
      expect(await expectError(res, 400)).toContain(`name: ${rule}`)
    }
  })

  test("a new member's user id; no user is made", async () => {
    for (const [id, rule] of BAD) {
      const res = await gw().fetch("/v1/workspaces/default/members/add", { method: "POST", json: { user_ids: ["user_fine", id] } })
      expect(await expectError(res, 400)).toContain(rule)
    }
    const members = (await (await gw().fetch("/v1/workspaces/default/members")).json()) as { data: Array<{ user_id: string }> }
    expect(members.data.map((m) => m.user_id)).not.toContain("user_fine")
  })
})
