/** The bearer-key middleware of the control plane: provides the Principal or fails 401. */
import { HttpApiMiddleware, HttpApiSecurity } from "@effect/platform"
import { Effect, Layer, Redacted } from "effect"
import { Errors } from "../../domain/errors.js"
import { Auth, Principal } from "../../services/Auth.js"

export class Authentication extends HttpApiMiddleware.Tag<Authentication>()("Authentication", {
  provides: Principal,
  failure: Errors.Unauthorized,
  security: { bearer: HttpApiSecurity.bearer },
}) {}

export const AuthenticationLive = Layer.effect(
  Authentication,
  Effect.map(Auth, (auth) =>
    Authentication.of({
      bearer: (token) => auth.authenticateSecret(Redacted.value(token)),
    }),
  ),
)
