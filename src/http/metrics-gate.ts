/**
 * `GET /metrics` answers only with its bearer token (`metrics.token`, `GATEWAY_METRICS_TOKEN`):
 * on the public port, unauthenticated counters told the world the traffic, the providers and the
 * key cache (docs/operations.md#metrics). Without a token it is refused, naming the setting.
 */
import { createHash, timingSafeEqual } from "node:crypto"
import { Redacted } from "effect"
import { Unauthorized } from "../domain/errors.js"

const digest = (text: string) => createHash("sha256").update(text).digest()

/** The refusal for an `Authorization` header value, or undefined when it carries the token. */
export const metricsGate = (token: Redacted.Redacted<string> | undefined) => {
  if (token === undefined) {
    const unset = new Unauthorized({
      message: "GET /metrics needs a token: set metrics.token in the config file (or GATEWAY_METRICS_TOKEN) and send it as Authorization: Bearer <token>",
    })
    return (_authorization: string | null): Unauthorized | undefined => unset
  }
  const expected = digest(Redacted.value(token))
  const wrong = new Unauthorized({ message: "GET /metrics: missing or wrong bearer token (metrics.token)" })
  return (authorization: string | null): Unauthorized | undefined => {
    const given = authorization?.match(/^Bearer\s+(.+)$/i)?.[1]?.trim()
    // Compared as digests in constant time: the answer's timing does not tell how much of a guess was right.
    return given !== undefined && timingSafeEqual(digest(given), expected) ? undefined : wrong
  }
}
