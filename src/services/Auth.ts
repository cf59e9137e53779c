/**
 * Bearer key → principal. One Auth serves both planes. A cache hit does no I/O
 * (KeyStore.cachedByHash); a disabled, deleted or expired key is refused.
 */
import { Context, Effect, Option } from "effect"
import { Forbidden, Unauthorized } from "../domain/errors.js"
import { hashSecret, type KeyRow, KeyStore } from "./KeyStore.js"

export interface PrincipalShape {
  readonly key: KeyRow
  readonly hash: string
  readonly userId: string
  readonly workspaceId: string
  readonly isManagement: boolean
}

/** The authenticated caller of a request. */
export class Principal extends Context.Tag("Principal")<Principal, PrincipalShape>() {}

export const MANAGEMENT_ONLY = "Only management keys can perform this operation"

/** Fails with 403 unless the caller holds a management key. */
export const requireManagement = Effect.flatMap(Principal, (p) =>
  p.isManagement ? Effect.succeed(p) : Effect.fail(new Forbidden({ message: MANAGEMENT_ONLY })),
)

/** The secret of `Authorization: Bearer <secret>`, or undefined. */
export const bearerSecret = (header: string | null | undefined): string | undefined => {
  if (header == null) return undefined
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
  return match?.[1]
}

export class Auth extends Effect.Service<Auth>()("Auth", {
  effect: Effect.gen(function* () {
    const keys = yield* KeyStore

    const authenticateSecret = (secret: string | undefined) =>
      Effect.gen(function* () {
        if (secret === undefined || secret === "") {
          return yield* new Unauthorized({
            message: "Missing credentials: send your API key as 'Authorization: Bearer <key>'",
          })
        }
        const hash = hashSecret(secret)
        const found = yield* keys.cachedByHash(hash)
        if (Option.isNone(found)) return yield* new Unauthorized({ message: "Invalid API key" })
        const key = found.value
        if (key.disabled === 1) return yield* new Unauthorized({ message: "API key is disabled" })
        if (key.in_workspace === 0) {
          return yield* new Unauthorized({ message: "API key's user is no longer a member of the key's workspace" })
        }
        if (key.expires_at !== null && Date.parse(key.expires_at) <= Date.now()) {
          return yield* new Unauthorized({ message: `API key expired at ${key.expires_at}` })
        }
        return {
          key,
          hash,
          userId: key.user_id,
          workspaceId: key.workspace_id,
          isManagement: key.is_management === 1,
        } satisfies PrincipalShape
      })

    return {
      authenticateSecret,
      authenticateHeader: (header: string | null | undefined) => authenticateSecret(bearerSecret(header)),
    } as const
  }),
  dependencies: [KeyStore.Default],
}) {}
