/**
 * The route table `Bun.serve` serves (docs/architecture.md, "Two planes, one process"): every
 * control endpoint of the HttpApi behind the control guard (GET /v1/models also in Anthropic's
 * shape), each client format of the data plane at its path, count_tokens, one model, embeddings
 * and rerank, `/metrics`, the console, and for anything else a preflight, a 405 or a 404 in the
 * envelope. The test kit dispatches the same table in-process (src/testing/routes.ts). Every
 * handler is made here once, at start.
 */
import { HttpApi, OpenApi } from "@effect/platform"
import { type ApiError, errorResponse, InternalError, MethodNotAllowed, NotFound } from "../domain/errors.js"
import { errorResponseIn } from "../formats/format.js"
import type { MountedFormat } from "../formats/index.js"
import { messagesFormat } from "../formats/messages/index.js"
import { checkJsonContentType, hasBody } from "../pipeline/body.js"
import type { makeModelRoute } from "../pipeline/route.js"
import { GatewayApi } from "./Api.js"
import { Authentication } from "./api/security.js"
import { corsAccessOf } from "./cors.js"
import { type ControlGuard, guardedControl } from "./control-guard.js"
import type { makeEmbeddingRoutes } from "./embeddings/routes.js"
import { closing, type FrontDoor, type Handler, type Method, observed, type TracedHandler } from "./front-door.js"
import { metricsGate } from "./metrics-gate.js"

export type RouteHandler = (req: Request) => Response | Promise<Response>

/**
 * The route table `Bun.serve` serves, as its `routes` (path patterns, `:param` segments, a
 * trailing `*`) with `fetch` for whatever they do not take; the test kit dispatches the same table.
 */
export interface RouteTable {
  readonly routes: Record<string, Partial<Record<Method, RouteHandler>>>
  readonly fetch: RouteHandler
  readonly error: () => Response
}

/** The handlers the table mounts, each made once at start by the server. */
export interface Mounts {
  readonly front: FrontDoor
  readonly guard: ControlGuard
  readonly formats: ReadonlyArray<MountedFormat>
  readonly responses: ReturnType<typeof makeModelRoute>
  readonly countTokens: TracedHandler
  readonly retrieveModel: TracedHandler
  /** GET /v1/models in the Anthropic SDK's shape, for the requests that carry `anthropic-version`. */
  readonly anthropicModelList: TracedHandler
  readonly embeddings: ReturnType<typeof makeEmbeddingRoutes>
  /** The console's page and assets, when it is on. */
  readonly console: Record<string, RouteHandler> | undefined
}

/** A path the table serves, for the unmatched handler's 405s and preflights. `errorOf` marks a data-plane path (open to browsers whatever the method). */
interface Known {
  readonly path: string
  readonly pattern: RegExp
  readonly methods: ReadonlyArray<string>
  readonly errorOf?: (e: ApiError) => Response
}

interface Table {
  readonly routes: Record<string, Partial<Record<Method, RouteHandler>>>
  readonly known: Array<Known>
}

/** A served path with its parameters; not with a trailing slash, which Bun's router does not serve either (a 404, not a 405 naming methods that would not answer it). */
const patternOf = (path: string) => new RegExp(`^${path.replace(/:[^/]+/g, "[^/]+")}$`)

const mount = (table: Table, path: string, methods: Partial<Record<Method, RouteHandler>>, errorOf?: (e: ApiError) => Response) => {
  table.routes[path] = methods
  table.known.push({ path, pattern: patternOf(path), methods: Object.keys(methods), ...(errorOf === undefined ? {} : { errorOf }) })
}

/** Every (path, method) the control plane serves, and whether it needs a key, read from the HttpApi itself. */
const controlRoutes = (): Map<string, Map<Method, boolean>> => {
  const routes = new Map<string, Map<Method, boolean>>()
  HttpApi.reflect(GatewayApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint, middleware }) => {
      const methods = routes.get(endpoint.path) ?? new Map<Method, boolean>()
      methods.set(endpoint.method as Method, [...middleware].some((m) => m.key === Authentication.key))
      routes.set(endpoint.path, methods)
    },
  })
  return routes
}

/** A JSON endpoint: a body declared as another type is refused in `errorOf`'s envelope before the handler reads it. */
const jsonOnly =
  (handle: TracedHandler, errorOf: (e: ApiError) => Response): TracedHandler =>
  (req, trace) => {
    if (hasBody(req)) {
      const type = checkJsonContentType(req)
      if (type !== undefined) return closing(errorOf(type))
    }
    return handle(req, trace)
  }

/** A control route's handler wrapped by another (which may answer some requests itself), by path and method. */
type Around = Readonly<Record<string, Partial<Record<Method, (control: TracedHandler) => TracedHandler>>>>

/** The HttpApi's endpoints behind the control guard (each through its `around` when it has one), and its OpenAPI document. */
const mountControlPlane = (table: Table, front: FrontDoor, guard: ControlGuard, around: Around) => {
  for (const [path, methods] of controlRoutes()) {
    const handlerOf = (m: Method, secured: boolean) => {
      const control = guardedControl(guard, secured)
      return around[path]?.[m]?.(control) ?? control
    }
    mount(table, path, Object.fromEntries([...methods].map(([m, secured]) => [m, observed(front, path, m, handlerOf(m, secured))])))
  }
  const openapi = JSON.stringify(OpenApi.fromApi(GatewayApi))
  mount(table, "/v1/openapi.json", {
    GET: observed(front, "/v1/openapi.json", "GET", () => new Response(openapi, { headers: { "content-type": "application/json" } })),
  })
}

/** The data plane: every client format at its path on the same route, count_tokens, one model, embeddings and rerank. */
const mountDataPlane = (table: Table, m: Mounts) => {
  const { front } = m
  for (const { path, format } of m.formats) {
    // `errorOf`: a data-plane path answers its 405 in its format's envelope.
    const errorOf = (e: ApiError) => errorResponseIn(format, e)
    // Not async: the route's own promise is returned as it is (an async wrapper adds a promise and its ticks).
    const post = observed(front, path, "POST", jsonOnly(m.responses.handlerFor(format), errorOf), errorOf, corsAccessOf(path, "POST", true))
    mount(table, path, { POST: post }, errorOf)
  }
  // Anthropic's token count beside POST /v1/messages (coding agents call it before each turn).
  const messagesError = (e: ApiError) => errorResponseIn(messagesFormat, e)
  const countPath = "/v1/messages/count_tokens"
  mount(
    table,
    countPath,
    { POST: observed(front, countPath, "POST", jsonOnly(m.countTokens, messagesError), messagesError, corsAccessOf(countPath, "POST", true)) },
    messagesError,
  )
  // One model in the OpenAI or the Anthropic shape; its id's slash sent encoded (one segment) or plain (two).
  for (const path of ["/v1/models/:id", "/v1/models/:author/:slug"]) mount(table, path, { GET: observed(front, "/v1/models/{id}", "GET", m.retrieveModel) })
  // Embeddings and rerank: routed, charged and recorded like a model request (docs/embeddings.md).
  for (const [path, handle] of [
    ["/v1/embeddings", m.embeddings.embeddings],
    ["/v1/rerank", m.embeddings.rerank],
  ] as const) {
    mount(table, path, { POST: observed(front, path, "POST", jsonOnly(handle, errorResponse)) })
  }
}

/** Prometheus text, behind its own bearer token (metrics.token): never served to the world (docs/operations.md#metrics). */
const mountMetrics = (table: Table, front: FrontDoor) => {
  const { metrics } = front
  if (metrics === undefined) return
  const exposition = { "content-type": "text/plain; version=0.0.4; charset=utf-8" }
  const refusal = metricsGate(front.settings.metricsToken)
  mount(table, "/metrics", {
    GET: observed(front, "/metrics", "GET", (req) => {
      const refused = refusal(req.headers.get("authorization"))
      return refused !== undefined ? closing(errorResponse(refused)) : new Response(metrics.render(), { headers: exposition })
    }),
  })
}

/** Anything no route takes: a browser's preflight on a known path, else 405 on a known path, else 404, both in the envelope. */
const unmatched = (front: FrontDoor, known: ReadonlyArray<Known>): Handler =>
  observed(front, "unmatched", "ANY", (req) => {
    const path = new URL(req.url).pathname
    const match = known.find((k) => k.pattern.test(path))
    if (match !== undefined && req.method === "OPTIONS" && req.headers.has("origin") && req.headers.has("access-control-request-method")) {
      return front.cors.preflight(req, match.path, match.methods, match.errorOf !== undefined)
    }
    if (match?.errorOf !== undefined) {
      const res = match.errorOf(new MethodNotAllowed({ message: `Method ${req.method} is not allowed on ${path}; allowed: ${match.methods.join(", ")}` }))
      res.headers.set("allow", match.methods.join(", "))
      return res
    }
    if (match !== undefined) {
      return new Response(
        JSON.stringify({
          error: { code: 405, message: `Method ${req.method} is not allowed on ${path}; allowed: ${match.methods.join(", ")}` },
          user_id: null,
        }),
        { status: 405, headers: { "content-type": "application/json", allow: match.methods.join(", ") } },
      )
    }
    return errorResponse(new NotFound({ message: `No such endpoint: ${req.method} ${path}` }))
  })

export const makeRouteTable = (m: Mounts): RouteTable => {
  const table: Table = { routes: {}, known: [] }
  mountControlPlane(table, m.front, m.guard, {
    // The Anthropic SDK's models.list (its key in x-api-key, which the HttpApi does not read) is answered in its shape.
    "/v1/models": { GET: (control) => (req, trace) => (req.headers.has("anthropic-version") ? m.anthropicModelList(req, trace) : control(req, trace)) },
  })
  mountDataPlane(table, m)
  mountMetrics(table, m.front)
  // The web console (README, Console): its page and assets under /console/, none of it when off.
  if (m.console !== undefined) for (const [path, handler] of Object.entries(m.console)) table.routes[path] = { GET: handler }
  return {
    routes: table.routes,
    fetch: unmatched(m.front, table.known),
    error: () => errorResponse(new InternalError({ message: "Internal server error" })),
  }
}
