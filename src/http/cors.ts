/**
 * Browser access (docs/operations.md#browsers-cors). The data plane and the read endpoints answer
 * the origins of `cors.allowed_origins` (default `*`); the management endpoints only origins listed
 * by name. Credentials are never allowed: a browser app sends its key in a header, no cookie is read.
 * Decided per route at start; a request without `Origin` (every non-browser client) pays one header read.
 */
import { errorResponse, Forbidden } from "../domain/errors.js"

/** `open`: any allowed origin (`*` included); `management`: only the origins listed by name. */
export type CorsAccess = "open" | "management"

/** The management endpoints (and /metrics), whatever the method: keys, workspaces, destinations, stored content. */
const MANAGEMENT_PATHS = /^\/v1\/(keys|workspaces|observability)(\/|$)|^\/v1\/generation\/content\/?$|^\/metrics\/?$/

/** The data plane and the GET endpoints outside the management paths are open; the rest is management. */
export const corsAccessOf = (path: string, method: string, dataPlane: boolean): CorsAccess =>
  !MANAGEMENT_PATHS.test(path) && (dataPlane || method === "GET") ? "open" : "management"

/** What a browser script may read of an answer besides the simple headers. */
const EXPOSED = "x-generation-id, x-request-id, server-timing, retry-after"
/** How long a browser may reuse a preflight's answer (Chromium caps it at 2 hours, Firefox at 24). */
const MAX_AGE_S = "600"
/** `Access-Control-Request-Headers` as browsers send it: header names separated by commas. */
const HEADER_LIST = /^[A-Za-z0-9!#$%&'*+.^_`|~-]+(\s*,\s*[A-Za-z0-9!#$%&'*+.^_`|~-]+)*$/

export const makeCors = (origins: ReadonlyArray<string>) => {
  const anyOrigin = origins.includes("*")
  const listed = new Set(origins.filter((o) => o !== "*"))
  /** The `Access-Control-Allow-Origin` value for `origin` on a route, or undefined when it is not allowed. */
  const allowOrigin = (origin: string, access: CorsAccess): string | undefined =>
    access === "open" && anyOrigin ? "*" : listed.has(origin) ? origin : undefined

  return {
    /** Puts the CORS headers on an answer to a request that carried `Origin` (nothing when the origin is not allowed). */
    apply: (res: Response, origin: string, access: CorsAccess): void => {
      const allowed = allowOrigin(origin, access)
      if (allowed === undefined) return
      try {
        res.headers.set("access-control-allow-origin", allowed)
        res.headers.set("access-control-expose-headers", EXPOSED)
        if (allowed !== "*") res.headers.append("vary", "Origin")
      } catch {
        // A response with immutable headers goes out without them.
      }
    },
    /**
     * The answer to a preflight (`OPTIONS` with `Access-Control-Request-Method`) on a known path:
     * 204 with the path's methods and the headers asked for, or 403 naming the rule.
     */
    preflight: (req: Request, path: string, methods: ReadonlyArray<string>, dataPlane: boolean): Response => {
      const origin = req.headers.get("origin") ?? ""
      const method = (req.headers.get("access-control-request-method") ?? "").toUpperCase()
      const access = corsAccessOf(path, method, dataPlane)
      const allowed = allowOrigin(origin, access)
      if (allowed === undefined) {
        return errorResponse(
          new Forbidden({
            message:
              access === "management"
                ? `Origin '${origin.slice(0, 200)}' may not call ${method} ${path} from a browser: management endpoints answer only origins listed by name in cors.allowed_origins`
                : `Origin '${origin.slice(0, 200)}' may not call ${path} from a browser: it is not in cors.allowed_origins`,
          }),
        )
      }
      const headers: Record<string, string> = {
        "access-control-allow-origin": allowed,
        "access-control-allow-methods": methods.join(", "),
        "access-control-max-age": MAX_AGE_S,
        vary: "Origin, Access-Control-Request-Method, Access-Control-Request-Headers",
      }
      const asked = req.headers.get("access-control-request-headers")
      if (asked !== null && HEADER_LIST.test(asked.trim())) headers["access-control-allow-headers"] = asked.trim()
      return new Response(null, { status: 204, headers })
    },
  }
}
export type Cors = ReturnType<typeof makeCors>
