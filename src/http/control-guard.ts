/**
 * The control plane behind the key, body and content-type checks (docs/architecture.md, "Two
 * planes, one process"). On a route that needs a key, the key is checked from the headers before
 * the body is read (the HttpApi checks it again). The body is read here under the cap and the body
 * deadline, parsed as the data plane parses it (depth cap; `application/*+json` too) and handed on
 * as plain JSON: the platform's own decode of a 15,000-deep body overflowed the stack formatting
 * its error (500).
 */
import { Effect, Either } from "effect"
import { errorResponse, ServiceUnavailable } from "../domain/errors.js"
import {
  BODY_TIMED_OUT,
  bodyTimedOut,
  checkJsonContentType,
  hasBody,
  type makeBodyDeadline,
  readCappedText,
  tooLarge,
  tooManyUnfinished,
  type UnfinishedBodies,
} from "../pipeline/body.js"
import { parseJson } from "../pipeline/ingress.js"
import type { RequestTrace } from "../pipeline/trace.js"
import { type Auth, bearerSecret } from "../services/Auth.js"
import { closing, type Handler, type TracedHandler } from "./front-door.js"

/** What the guard needs, made once at start. */
export interface ControlGuard {
  readonly auth: Auth
  /** Runs the key check on the gateway's runtime. */
  readonly runtime: { readonly runPromise: <A, E>(effect: Effect.Effect<A, E>) => Promise<A> }
  /** The HttpApi's web handler. */
  readonly control: Handler
  readonly maxBodyBytes: number
  readonly bodyTimeoutMs: number
  readonly bodyDeadline: ReturnType<typeof makeBodyDeadline>
  /** Bodies still arriving after the key was accepted, per key and per client address. */
  readonly bodies: UnfinishedBodies
  readonly authenticated: (req: Request, trace: RequestTrace | undefined) => void
  /** How long a read (GET or HEAD) waits for its answer: the ledger's commit timeout, the bound on a stalled store. */
  readonly readTimeoutMs: number
}

/**
 * A read past its deadline is the unreachable store's 503 with `Retry-After`: a query on a stalled
 * connection holds its answer until the stall ends (minutes), and the caller should not wait that
 * long. The read itself runs on and its answer is dropped; nothing changed, so nothing is lost.
 * Writes have no such deadline: an answer before their commit could say "failed" of a change that
 * then happens.
 */
const withReadDeadline = (answer: Response | Promise<Response>, ms: number): Promise<Response> => {
  let timer: ReturnType<typeof setTimeout> | undefined
  const late = new Promise<Response>((resolve) => {
    timer = setTimeout(
      () => resolve(errorResponse(new ServiceUnavailable({ message: `The gateway's database did not answer within ${ms} ms; try again shortly`, retry_after: 5 }))),
      ms,
    )
  })
  return Promise.race([answer, late]).finally(() => clearTimeout(timer))
}

const isRead = (req: Request): boolean => req.method === "GET" || req.method === "HEAD"

/** The control plane's handler of a route, `secured` when the route needs a key. */
export const guardedControl =
  (guard: ControlGuard, secured: boolean): TracedHandler =>
  async (req, trace) => {
    const { control, maxBodyBytes: max, bodies } = guard
    let keyHash: string | undefined
    if (secured) {
      const principal = await guard.runtime.runPromise(Effect.either(guard.auth.authenticateSecret(bearerSecret(req.headers.get("authorization")))))
      if (Either.isLeft(principal)) return closing(errorResponse(principal.left))
      keyHash = principal.right.hash
      guard.authenticated(req, trace)
    }
    if (!hasBody(req)) {
      // A declared type is checked on an empty body too: the platform would parse it as that type (multipart: 500).
      const type = req.headers.has("content-type") ? checkJsonContentType(req) : undefined
      if (type !== undefined) return closing(errorResponse(type))
      return isRead(req) ? withReadDeadline(control(req), guard.readTimeoutMs) : control(req)
    }
    const type = checkJsonContentType(req)
    if (type !== undefined) return closing(errorResponse(type))
    const length = req.headers.get("content-length")
    if (length !== null && Number(length) > max) return closing(errorResponse(tooLarge(max)))
    const slot = keyHash === undefined ? undefined : bodies.enter(keyHash, req)
    if (typeof slot === "string") return closing(errorResponse(tooManyUnfinished(slot, bodies)))
    const arriving = guard.bodyDeadline(Promise.resolve(readCappedText(req, max)), length)
    const text = await (slot === undefined ? arriving : arriving.finally(() => bodies.leave(slot)))
    if (text === BODY_TIMED_OUT) return closing(errorResponse(bodyTimedOut(guard.bodyTimeoutMs)))
    if (typeof text !== "string") return closing(errorResponse(text))
    const json = parseJson(text)
    if (Either.isLeft(json)) return errorResponse(json.left)
    const headers = new Headers(req.headers)
    headers.set("content-type", "application/json")
    headers.delete("content-length")
    headers.delete("transfer-encoding")
    // Decompressed above (body.ts): the platform gets the JSON as it is.
    headers.delete("content-encoding")
    return control(new Request(req.url, { method: req.method, headers, body: text }))
  }
