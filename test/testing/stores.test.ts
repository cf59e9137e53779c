import { expect, test } from "bun:test"
import { Effect, Option } from "effect"
import { StoreTest } from "gateway/testing"
import { KeyStore } from "gateway/src/services/KeyStore.js"
import { Users } from "gateway/src/services/Users.js"

test("a key made through the KeyStore is its owner's, with its daily limit", () =>
  Effect.gen(function* () {
    const users = yield* Users
    const keys = yield* KeyStore
    const workspaceId = yield* users.ensure("user_a")
    const { row } = yield* keys.create({ userId: "user_a", workspaceId, name: "ci", limit: 5, limitReset: "daily", includeByokInLimit: false })

    const found = yield* keys.findForUser("user_a", row.hash)
    expect(Option.map(found, (key) => key.limit_reset)).toEqual(Option.some("daily"))
    expect(Option.isNone(yield* keys.findForUser("user_b", row.hash))).toBe(true)
  }).pipe(Effect.provide(StoreTest.all()), Effect.runPromise))
