/**
 * Bearer key → principal. `principalOf` is the one rule for both planes: a disabled, deleted,
 * expired or orphaned key is refused. The control plane authenticates through `Auth` (a cache
 * hit does no I/O, KeyStore.cachedByHash); the data plane calls `principalOf` from plain code.
 */
import { Context, Effect, Either, Option } from "effect"
import { Forbidden, Unauthorized } from "../domain/errors.js"
import { hasExpired, keyShaped } from "../domain/keys.js"
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

/** The key as the data plane reads it: `Authorization: Bearer` first, else Anthropic's `x-api-key`. */
export const requestSecret = (headers: Headers): string | undefined => {
  const authorization = headers.get("authorization")
  return authorization === null ? (headers.get("x-api-key") ?? undefined) : bearerSecret(authorization)
}

export const INVALID_KEY = "Invalid API key"

export const MISSING_CREDENTIALS = "Missing credentials: send your API key as 'Authorization: Bearer <key>'"

/** The principal of a key row found by its hash, or why the key may not be used now. */
export const principalOf = (hash: string, key: KeyRow | undefined, nowMs: number): Either.Either<PrincipalShape, Unauthorized> => {
  if (key === undefined) return Either.left(new Unauthorized({ message: INVALID_KEY }))
  if (key.disabled === 1) return Either.left(new Unauthorized({ message: "API key is disabled" }))
  if (key.in_workspace === 0) {
    return Either.left(new Unauthorized({ message: "API key's user is no longer a member of the key's workspace" }))
  }
  if (hasExpired(key.expires_at, nowMs)) {
    return Either.left(new Unauthorized({ message: `API key expired at ${key.expires_at}` }))
  }
  return Either.right({
    key,
    hash,
    userId: key.user_id,
    workspaceId: key.workspace_id,
    isManagement: key.is_management === 1,
  })
}

export class Auth extends Effect.Service<Auth>()("Auth", {
  effect: Effect.gen(function* () {
    const keys = yield* KeyStore

    const authenticateSecret = (secret: string | undefined) =>
      Effect.gen(function* () {
        if (secret === undefined || secret === "") return yield* new Unauthorized({ message: MISSING_CREDENTIALS })
        if (!keyShaped(secret)) return yield* new Unauthorized({ message: INVALID_KEY })
        const hash = hashSecret(secret)
        const found = yield* keys.cachedByHash(hash)
        return yield* principalOf(hash, Option.getOrUndefined(found), Date.now())
      })

    return { authenticateSecret } as const
  }),
  dependencies: [KeyStore.Default],
}) {}
