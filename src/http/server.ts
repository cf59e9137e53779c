/**
 * One Bun server, two planes (DESIGN §4). The front door is Bun's router: every control
 * endpoint of the HttpApi is a route to its web handler, POST /v1/responses is a native
 * route, and anything else is a 404 or 405 in the spec's envelope. Bodies over the maximum
 * are refused with 413 before they are read.
 */
import { HttpApi, HttpApiBuilder, HttpApp, OpenApi } from "@effect/platform"
import { Context, Effect, type Layer, ManagedRuntime } from "effect"
import { appLayer } from "../app.js"
import { GatewayConfig } from "../config/Config.js"
import { errorResponse, InternalError, NotFound } from "../domain/errors.js"
import { bootstrap } from "../services/bootstrap.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { GatewayApi } from "./Api.js"
import { checkJsonContentType, hasBody, readCapped, tooLarge } from "./body.js"
import { makeResponsesRoute } from "./responses/route.js"

type Handler = (req: Request) => Response | Promise<Response>
type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

/** Every (path, method) the control plane serves, read from the HttpApi itself. */
const controlRoutes = (): Map<string, Set<Method>> => {
  const routes = new Map<string, Set<Method>>()
  HttpApi.reflect(GatewayApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const methods = routes.get(endpoint.path) ?? new Set<Method>()
      methods.add(endpoint.method as Method)
      routes.set(endpoint.path, methods)
    },
  })
  return routes
}

const patternOf = (path: string) => new RegExp(`^${path.replace(/:[^/]+/g, "[^/]+")}/?$`)

export const startServer = async (config: Layer.Layer<GatewayConfig, unknown>, options: { port?: number } = {}) => {
  const runtime = ManagedRuntime.make(appLayer(config))
  const rt = await runtime.runtime()
  const settings = Context.get(rt.context, GatewayConfig)
  const booted = await runtime.runPromise(bootstrap)
  const controlApp = await runtime.runPromise(HttpApiBuilder.httpApp)
  const control = HttpApp.toWebHandlerRuntime(rt)(controlApp)
  const max = settings.maxBodyBytes

  /** The control plane behind the body and content-type checks. */
  const guardedControl: Handler = async (req) => {
    if (!hasBody(req)) return control(req)
    const type = checkJsonContentType(req)
    if (type !== undefined) return errorResponse(type)
    if (req.headers.has("content-length")) {
      if (Number(req.headers.get("content-length")) > max) return errorResponse(tooLarge(max))
      return control(req)
    }
    // Chunked upload: read it under the cap, then hand the bytes on.
    const body = await readCapped(req, max)
    if (!(body instanceof Uint8Array)) return errorResponse(body)
    return control(new Request(req.url, { method: req.method, headers: req.headers, body }))
  }

  const routes: Record<string, Partial<Record<Method, Handler>>> = {}
  const known: Array<{ pattern: RegExp; methods: Array<string> }> = []
  for (const [path, methods] of controlRoutes()) {
    routes[path] = Object.fromEntries([...methods].map((m) => [m, guardedControl]))
    known.push({ pattern: patternOf(path), methods: [...methods] })
  }
  const openapi = JSON.stringify(OpenApi.fromApi(GatewayApi))
  routes["/v1/openapi.json"] = {
    GET: () => new Response(openapi, { headers: { "content-type": "application/json" } }),
  }
  known.push({ pattern: patternOf("/v1/openapi.json"), methods: ["GET"] })
  const responses = makeResponsesRoute(rt, { settings })
  routes["/v1/responses"] = {
    POST: async (req) => {
      if (hasBody(req)) {
        const type = checkJsonContentType(req)
        if (type !== undefined) return errorResponse(type)
      }
      return responses.handle(req)
    },
  }
  known.push({ pattern: patternOf("/v1/responses"), methods: ["POST"] })

  const server = Bun.serve({
    port: options.port ?? settings.port,
    hostname: settings.host,
    // We enforce the body limit ourselves (Bun's own 413 has no envelope); this is a backstop.
    maxRequestBodySize: max * 2 + 1024,
    idleTimeout: 0,
    routes,
    fetch: (req) => {
      const path = new URL(req.url).pathname
      const match = known.find((k) => k.pattern.test(path))
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
    },
    error: () => errorResponse(new InternalError({ message: "Internal server error" })),
  })

  return {
    server,
    port: server.port as number,
    url: `http://${settings.host === "0.0.0.0" ? "127.0.0.1" : settings.host}:${server.port}`,
    settings,
    runtime,
    createdSecret: booted.createdSecret,
    /** Waits for in-flight settlements, then makes every queued generation record durable. */
    drain: async () => {
      await responses.drain()
      await runtime.runPromise(Effect.flatMap(GenerationStore, (g) => g.flush))
    },
    stop: async () => {
      await server.stop(true)
      await responses.drain()
      await runtime.dispose()
    },
  }
}

export type RunningServer = Awaited<ReturnType<typeof startServer>>
