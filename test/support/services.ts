/** The service layers over a fresh database, for tests that call services directly. */
import { afterAll, beforeAll } from "bun:test"
import { Clock, Effect, Layer, ManagedRuntime } from "effect"
import { ServicesLayer } from "../../src/app.js"
import { GatewayConfig, type Settings, testSettings } from "../../src/config/Config.js"
import { KeyStore, type NewKey } from "../../src/services/KeyStore.js"
import { Users } from "../../src/services/Users.js"
import { StoreLive } from "../../src/store/Store.js"
import { freshDatabase } from "./db.js"

export const servicesRuntime = async (overrides: Partial<Settings> = {}) => {
  const db = await freshDatabase()
  const config = GatewayConfig.layer(testSettings({ databaseUrl: db.url, ...overrides }))
  const runtime = ManagedRuntime.make(ServicesLayer.pipe(Layer.provideMerge(StoreLive), Layer.provideMerge(config)))
  await runtime.runtime()
  return {
    runtime,
    dispose: async () => {
      await runtime.dispose()
      await db.drop()
    },
  }
}

/** One services runtime per test file. */
export const useServices = (overrides: Partial<Settings> = {}) => {
  const ref = {} as { current: Awaited<ReturnType<typeof servicesRuntime>> }
  beforeAll(async () => {
    ref.current = await servicesRuntime(overrides)
  })
  afterAll(async () => {
    await ref.current?.dispose()
  })
  return () => ref.current.runtime
}

/** A clock frozen at `iso` for reading "now"; sleeping still takes real time. */
export const clockAt = (iso: string): Clock.Clock => {
  const ms = Date.parse(iso)
  const live = Clock.make()
  return {
    ...live,
    unsafeCurrentTimeMillis: () => ms,
    unsafeCurrentTimeNanos: () => BigInt(ms) * 1_000_000n,
    currentTimeMillis: Effect.succeed(ms),
    currentTimeNanos: Effect.succeed(BigInt(ms) * 1_000_000n),
  }
}

export const at = <A, E, R>(iso: string, effect: Effect.Effect<A, E, R>) => Effect.withClock(effect, clockAt(iso))

/** A key of a new user, in the workspace the user is given: its row and secret, the user and the workspace. */
export const newUserKey = (key: Omit<NewKey, "userId" | "workspaceId">) =>
  Effect.gen(function* () {
    const userId = `user_${crypto.randomUUID().slice(0, 8)}`
    const workspaceId = yield* (yield* Users).ensure(userId)
    const { row, secret } = yield* (yield* KeyStore).create({ userId, workspaceId, ...key })
    return { row, secret, userId, workspaceId }
  })
