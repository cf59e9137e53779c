/**
 * Start-up chores: the first management key of a new install (printed once), and the
 * management key named by GATEWAY_MANAGEMENT_KEY (for automation).
 */
import { Effect, Option, Redacted } from "effect"
import { GatewayConfig } from "../config/Config.js"
import { hashSecret, KeyStore } from "./KeyStore.js"
import { Spend } from "./Spend.js"
import { newUserId, Users } from "./Users.js"

export interface Bootstrapped {
  /** The secret of a management key created just now, to print once. */
  readonly createdSecret: Option.Option<string>
}

export const bootstrap = Effect.gen(function* () {
  const config = yield* GatewayConfig
  const keys = yield* KeyStore
  const users = yield* Users
  const spend = yield* Spend
  // Holds a crashed run of this instance left, and those whose owner stopped renewing their lease.
  const released = yield* spend.releaseOrphans
  if (released > 0) yield* Effect.logWarning(`Released ${released} hold(s) left by a crashed process`)
  if (Option.isSome(config.managementKey)) {
    const secret = Redacted.value(config.managementKey.value)
    const hash = hashSecret(secret)
    // The variable's key is the operator's way in: deleted or disabled through the API (by
    // anyone holding it), it would lock every start out (a deleted row keeps its hash) or refuse
    // every call. The variable wins at start.
    const undone = yield* keys.reinstateManagement(hash)
    if (undone !== undefined) yield* Effect.logWarning(`GATEWAY_MANAGEMENT_KEY's key was ${undone.join(", ")}: made a usable management key again`)
    const existing = yield* keys.cachedByHash(hash)
    if (Option.isNone(existing)) {
      const userId = "user_admin"
      const workspaceId = yield* users.ensure(userId)
      yield* keys.create({ userId, workspaceId, name: "Management key (GATEWAY_MANAGEMENT_KEY)", isManagement: true, secret })
    }
    return { createdSecret: Option.none() } satisfies Bootstrapped
  }
  if ((yield* keys.countAll) > 0) return { createdSecret: Option.none() } satisfies Bootstrapped
  const userId = newUserId()
  const workspaceId = yield* users.ensure(userId)
  const { secret } = yield* keys.create({ userId, workspaceId, name: "First management key", isManagement: true })
  return { createdSecret: Option.some(secret) } satisfies Bootstrapped
})
