/**
 * One Bun server, two planes (docs/pipeline.md). The front door is Bun's router: every control
 * endpoint of the HttpApi is a route to its web handler, POST /v1/responses is a native
 * route, and anything else is a 404 or 405 in the spec's envelope. Bodies over the maximum
 * are refused with 413 before they are read.
 */
import { HttpApi, HttpApiBuilder, HttpApp, OpenApi } from "@effect/platform"
import { Context, Effect, Either, Layer, ManagedRuntime } from "effect"
import { appLayer } from "../app.js"
import { Broadcast } from "../broadcast/Broadcast.js"
import { ALLOWED_HEADERS, OwnTraces } from "../broadcast/own-traces.js"
import { GatewayConfig } from "../config/Config.js"
import { type ApiError, errorResponse, InternalError, MethodNotAllowed, NotFound, ServiceUnavailable } from "../domain/errors.js"
import { isStoreUnavailable } from "../store/unavailable.js"
import { formats as mountedFormats, type MountedFormat } from "../formats/index.js"
import { errorResponseIn } from "../formats/format.js"
import { bootstrap } from "../services/bootstrap.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { KeyStore } from "../services/KeyStore.js"
import { GatewayApi } from "./Api.js"
import { Auth, bearerSecret } from "../services/Auth.js"
import { Authentication } from "./api/security.js"
import {
  BODY_TIMED_OUT,
  bodyTimedOut,
  checkJsonContentType,
  DEFAULT_MAX_UNFINISHED_BODIES,
  hasBody,
  makeBodyDeadline,
  readCappedText,
  tooLarge,
  tooManyUnfinished,
  UnfinishedBodies,
} from "../pipeline/body.js"
import { loggerLayer, logWriter, makeErrorLog } from "../lib/log.js"
import { makeRequestLogger } from "./request-log.js"
import { GatewayMetrics, requestIdOf } from "./metrics.js"
import { RequestTrace, serverTiming, type TraceEnd } from "../pipeline/trace.js"
import { parseJson } from "../pipeline/ingress.js"
import { RequestLifecycle, type Refusal } from "../pipeline/lifecycle.js"
import { makeModelRoute } from "../pipeline/route.js"
import { makeCountTokensRoute } from "./messages/count-tokens.js"
import { makeModelRetrieveRoute } from "./models/retrieve.js"
import { makeEmbeddingRoutes } from "./embeddings/routes.js"
import { messagesFormat } from "../formats/messages/index.js"
import { limitSendBuffers, limitUnsentBytes } from "../providers/socket-buffers.js"
import { type CorsAccess, corsAccessOf, makeCors } from "./cors.js"
import { compressedJson, MIN_COMPRESSED_BYTES } from "./compress.js"
import { metricsGate } from "./metrics-gate.js"
import consolePage from "../console/index.html"
import { consoleRoutes } from "./console.js"

type Handler = (req: Request) => Response | Promise<Response>
type TracedHandler = (req: Request, trace: RequestTrace) => Response | Promise<Response>
type Method = "GET" | "POST" | "PUT" | "PATCH" | "DELETE"

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

/** Early refusals close the connection: a body the client may still be sending is not read. */
const closing = (res: Response): Response => {
  res.headers.set("connection", "close")
  return res
}

const patternOf = (path: string) => new RegExp(`^${path.replace(/:[^/]+/g, "[^/]+")}/?$`)

export interface ServerOptions {
  readonly port?: number
  /** The client formats of the data plane (default: the registry, src/formats/index.ts). */
  readonly formats?: ReadonlyArray<MountedFormat>
  /** Several processes accept on the same port (`--workers`: SO_REUSEPORT). */
  readonly reusePort?: boolean
}

export interface GatewayOptions {
  /** The client formats of the data plane (default: the registry, src/formats/index.ts). */
  readonly formats?: ReadonlyArray<MountedFormat>
  /** Added to the service graph (the test kit's clock, src/testing/). */
  readonly layer?: Layer.Layer<never>
}

/**
 * What handlers ask of the server a request came through: its client's address (per-address
 * caps) and its idle timeout (lifted while an authenticated request runs). `Bun.serve`'s server
 * is one; the test kit's in-process client (src/testing/) is another.
 */
export interface RequestContext {
  readonly requestIP: (req: Request) => { readonly address: string } | null
  readonly timeout: (req: Request, seconds: number) => void
}

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

/** The gateway's program and route table, before any socket: `startServer` serves it; the test kit calls it in-process. */
export const makeGateway = async (config: Layer.Layer<GatewayConfig, unknown>, options: GatewayOptions = {}) => {
  // The services' own logs: JSON lines at the configured level, like the request lines.
  const logging = Layer.unwrapEffect(Effect.map(GatewayConfig, (s) => loggerLayer(s.logLevel))).pipe(Layer.provide(config))
  const app = appLayer(config).pipe(Layer.provide(logging))
  const runtime = ManagedRuntime.make(options.layer === undefined ? app : app.pipe(Layer.provide(options.layer), Layer.merge(options.layer)))
  const rt = await runtime.runtime()
  const settings = Context.get(rt.context, GatewayConfig)
  const booted = await runtime.runPromise(bootstrap)
  const controlApp = await runtime.runPromise(HttpApiBuilder.httpApp)
  const control = HttpApp.toWebHandlerRuntime(rt)(controlApp)
  const max = settings.maxBodyBytes
  const generations = Context.get(rt.context, GenerationStore)
  const keyStore = Context.get(rt.context, KeyStore)
  const broadcast = Context.get(rt.context, Broadcast)
  // The gateway's own traces: undefined unless OTEL_EXPORTER_OTLP_ENDPOINT is set (one check per request then).
  const ownTraces = Context.get(rt.context, OwnTraces)

  // Operations: plain counters per route, one log line per request, Server-Timing on every answer.
  const metrics = settings.metrics ? new GatewayMetrics() : undefined
  metrics?.scrape({
    ledgerQueueDepth: () => Effect.runSync(generations.queueDepth),
    ledgerStats: () => Effect.runSync(generations.stats),
    spool: () => generations.spoolStats(),
    keyCache: () => keyStore.cacheStats(),
    inFlight: () => lifecycle.count,
    broadcast: () => broadcast.stats(),
  })
  const logRequest = makeRequestLogger(settings.logLevel)
  const keepBodies = settings.logLevel === "debug"
  // Requests in progress (streams until their last event): capped, settled once, and awaited by a graceful shutdown.
  const lifecycle = new RequestLifecycle(settings.maxInFlight, settings.maxInFlightPerIp, (req) => context.requestIP(req)?.address ?? "")
  const idleTimeout = settings.idleTimeoutS
  let draining = false
  // The server requests come through, bound before the first request (`bind`).
  let context: RequestContext = {
    requestIP: () => null,
    timeout: () => {},
  }
  // Bodies still arriving after the key was accepted, per key and per client address (docs/operations.md).
  const bodies = new UnfinishedBodies(
    settings.catalog.server?.max_unfinished_bodies_per_key ?? DEFAULT_MAX_UNFINISHED_BODIES.perKey,
    settings.catalog.server?.max_unfinished_bodies_per_ip ?? DEFAULT_MAX_UNFINISHED_BODIES.perAddress,
    (req) => context.requestIP(req)?.address ?? "",
  )

  /**
   * A handler measured and logged as `route`: the trace ends with the response, or with the
   * stream's last event. Its own refusals (busy, shutting down, a failure) are in `errorOf`'s envelope.
   */
  const observed = (
    route: string,
    method: string,
    handler: TracedHandler,
    errorOf: (e: ApiError) => Response = errorResponse,
    access: CorsAccess = corsAccessOf(route, method, false),
  ): Handler => {
    const routeMetrics = metrics?.route(route, method)
    const finish: TraceEnd = (trace, status) => {
      const totalMs = performance.now() - trace.startedAt
      if (metrics !== undefined && routeMetrics !== undefined) {
        routeMetrics.record(status, totalMs / 1000)
        if (trace.streaming) metrics.streamsEnded++
        if (trace.provider !== undefined) {
          metrics.upstream.of(trace.provider).observe(trace.upstreamMs / 1000)
          metrics.overhead.observe(((trace.streaming ? trace.headMs : totalMs) - trace.upstreamMs) / 1000)
          if (trace.firstTokenMs !== undefined) metrics.timeToFirstToken.of(trace.provider).observe(trace.firstTokenMs / 1000)
        }
      }
      logRequest?.(trace, status, totalMs)
      ownTraces?.record({
        method: trace.method,
        route: trace.route,
        requestId: trace.id,
        status,
        startMs: performance.timeOrigin + trace.startedAt,
        endMs: performance.timeOrigin + trace.startedAt + totalMs,
        headers: trace.spanHeaders,
        traceparent: trace.traceparent,
        attempts: trace.attemptLog,
        provider: trace.provider,
        model: trace.model,
        generationId: trace.generationId,
        firstTokenMs: trace.firstTokenMs,
        streaming: trace.streaming,
        outcome: trace.outcome,
      })
      // The answer ends (a JSON body is handed over, a stream is closing): idle connections are bounded again.
      if (trace.lifted !== undefined) {
        context.timeout(trace.lifted, idleTimeout)
        trace.lifted = undefined
      }
      lifecycle.leave(trace)
    }
    return async (req) => {
      if (draining) return shuttingDown(errorOf)
      const trace = new RequestTrace(requestIdOf(req.headers), method, route, keepBodies, finish)
      if (ownTraces !== undefined) {
        trace.attemptLog = []
        trace.spanHeaders = {}
        for (const name of ALLOWED_HEADERS) {
          const value = req.headers.get(name)
          if (value !== null) trace.spanHeaders[name] = value
        }
        trace.traceparent = req.headers.get("traceparent") ?? undefined
      }
      const over = lifecycle.enter(req, trace)
      if (over !== undefined) {
        routeMetrics?.record(503, 0)
        return busy(over, errorOf)
      }
      let res: Response
      try {
        res = await handler(req, trace)
      } catch (e) {
        trace.streaming = false
        if (req.signal.aborted) {
          // The client went away (e.g. before its body arrived): not a server error (499, as nginx logs it).
          res = new Response(null, { status: 499 })
        } else if (isStoreUnavailable(e)) {
          // The database unreachable: the contract's 503 with Retry-After (logged once per outage by the ledger).
          generations.unavailable("answering a request", e)
          res = errorOf(new ServiceUnavailable({ message: "The gateway's database is unreachable; try again shortly", retry_after: 5 }))
        } else {
          if (settings.logLevel !== "none") {
            logWriter.write(JSON.stringify({ time: new Date().toISOString(), level: "error", msg: "unhandled failure", request_id: trace.id, error: String(e) }))
          }
          res = errorOf(new InternalError({ message: "Internal server error" }))
        }
      }
      const headMs = performance.now() - trace.startedAt
      trace.headMs = headMs
      if (!trace.headed) {
        try {
          res.headers.set("x-request-id", trace.id)
          res.headers.set("server-timing", serverTiming(trace, headMs))
        } catch {
          // A response with immutable headers goes out without them.
        }
      }
      // Browsers and compressing clients only: one header read each for every other request.
      if (!trace.streaming) {
        const accept = req.headers.get("accept-encoding")
        // A model answer its handler measured as short goes as it is: not read again (~4 µs) to learn its size.
        if (accept !== null && (trace.jsonChars === undefined || trace.jsonChars >= MIN_COMPRESSED_BYTES)) {
          const compressed = compressedJson(res, accept)
          res = compressed instanceof Promise ? await compressed : compressed
        }
      }
      const origin = req.headers.get("origin")
      if (origin !== null) cors.apply(res, origin, access)
      if (!trace.streaming) trace.end(res.status)
      else if (metrics !== undefined) metrics.streamsStarted++
      return res
    }
  }

  /** The request is authenticated: Bun's idle timeout is lifted for it until its answer ends (`finish`). */
  const authenticated = (req: Request, trace: RequestTrace | undefined) => {
    if (idleTimeout === 0 || trace === undefined) return
    context.timeout(req, 0)
    trace.lifted = req
  }

  const auth = Context.get(rt.context, Auth)
  const cors = makeCors(settings.corsOrigins)
  const controlBodyDeadline = makeBodyDeadline(settings.bodyTimeoutMs, max)

  /**
   * The control plane behind the key, body and content-type checks. On a route that needs a key,
   * the key is checked from the headers before the body is read (the HttpApi checks it again).
   * The body is read here under the cap and the body deadline, parsed as the data plane parses it
   * (depth cap; `application/*+json` too) and handed on as plain JSON: the platform's own decode
   * of a 15,000-deep body overflowed the stack formatting its error (500).
   */
  const guardedControl = (secured: boolean): TracedHandler => async (req, trace) => {
    let keyHash: string | undefined
    if (secured) {
      const principal = await runtime.runPromise(Effect.either(auth.authenticateSecret(bearerSecret(req.headers.get("authorization")))))
      if (Either.isLeft(principal)) return closing(errorResponse(principal.left))
      keyHash = principal.right.hash
      authenticated(req, trace)
    }
    if (!hasBody(req)) {
      // A declared type is checked on an empty body too: the platform would parse it as that type (multipart: 500).
      if (!req.headers.has("content-type")) return control(req)
      const type = checkJsonContentType(req)
      return type === undefined ? control(req) : closing(errorResponse(type))
    }
    const type = checkJsonContentType(req)
    if (type !== undefined) return closing(errorResponse(type))
    const length = req.headers.get("content-length")
    if (length !== null && Number(length) > max) return closing(errorResponse(tooLarge(max)))
    const slot = keyHash === undefined ? undefined : bodies.enter(keyHash, req)
    if (typeof slot === "string") return closing(errorResponse(tooManyUnfinished(slot, bodies)))
    const arriving = controlBodyDeadline(Promise.resolve(readCappedText(req, max)), length)
    const text = await (slot === undefined ? arriving : arriving.finally(() => bodies.leave(slot)))
    if (text === BODY_TIMED_OUT) return closing(errorResponse(bodyTimedOut(settings.bodyTimeoutMs)))
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

  const routes: Record<string, Partial<Record<Method, RouteHandler>>> = {}
  // `errorOf`: a data-plane path answers its 405 in its format's envelope.
  // `errorOf` marks a data-plane path (open to browsers whatever the method).
  const known: Array<{ path: string; pattern: RegExp; methods: Array<string>; errorOf?: (e: ApiError) => Response }> = []
  for (const [path, methods] of controlRoutes()) {
    routes[path] = Object.fromEntries([...methods].map(([m, secured]) => [m, observed(path, m, guardedControl(secured))]))
    known.push({ path, pattern: patternOf(path), methods: [...methods.keys()] })
  }
  const openapi = JSON.stringify(OpenApi.fromApi(GatewayApi))
  routes["/v1/openapi.json"] = {
    GET: observed("/v1/openapi.json", "GET", () => new Response(openapi, { headers: { "content-type": "application/json" } })),
  }
  known.push({ path: "/v1/openapi.json", pattern: patternOf("/v1/openapi.json"), methods: ["GET"] })
  // The data plane: every client format of the registry at its path, on the same route.
  const responses = makeModelRoute(rt, { settings, lifecycle, log: makeErrorLog(settings.logLevel), authenticated, bodies })
  for (const { path, format } of options.formats ?? mountedFormats) {
    const handle = responses.handlerFor(format)
    const errorOf = (e: ApiError) => errorResponseIn(format, e)
    routes[path] = {
      // Not async: the route's own promise is returned as it is (an async wrapper adds a promise and its ticks).
      POST: observed(
        path,
        "POST",
        (req, trace) => {
          if (hasBody(req)) {
            const type = checkJsonContentType(req)
            if (type !== undefined) return closing(errorOf(type))
          }
          return handle(req, trace)
        },
        errorOf,
        corsAccessOf(path, "POST", true),
      ),
    }
    known.push({ path, pattern: patternOf(path), methods: ["POST"], errorOf })
  }
  // Anthropic's token count beside POST /v1/messages (coding agents call it before each turn).
  const countTokens = makeCountTokensRoute(rt, settings, bodies)
  const messagesError = (e: ApiError) => errorResponseIn(messagesFormat, e)
  routes["/v1/messages/count_tokens"] = {
    POST: observed(
      "/v1/messages/count_tokens",
      "POST",
      (req) => {
        if (hasBody(req)) {
          const type = checkJsonContentType(req)
          if (type !== undefined) return closing(messagesError(type))
        }
        return countTokens(req)
      },
      messagesError,
      corsAccessOf("/v1/messages/count_tokens", "POST", true),
    ),
  }
    known.push({ path: "/v1/messages/count_tokens", pattern: patternOf("/v1/messages/count_tokens"), methods: ["POST"], errorOf: messagesError })
  // One model in the OpenAI or the Anthropic shape; its id's slash sent encoded (one segment) or plain (two).
  const retrieveModel = makeModelRetrieveRoute(rt)
  for (const path of ["/v1/models/:id", "/v1/models/:author/:slug"]) {
    routes[path] = { GET: observed("/v1/models/{id}", "GET", retrieveModel) }
    known.push({ path, pattern: patternOf(path), methods: ["GET"] })
  }
  // Embeddings and rerank: routed, charged and recorded like a model request (docs/embeddings.md).
  const embeddingRoutes = makeEmbeddingRoutes(rt, { settings, lifecycle, log: makeErrorLog(settings.logLevel), authenticated })
  for (const [path, handle] of [
    ["/v1/embeddings", embeddingRoutes.embeddings],
    ["/v1/rerank", embeddingRoutes.rerank],
  ] as const) {
    routes[path] = {
      POST: observed(path, "POST", (req, trace) => {
        if (hasBody(req)) {
          const type = checkJsonContentType(req)
          if (type !== undefined) return closing(errorResponse(type))
        }
        return handle(req, trace)
      }),
    }
    known.push({ path, pattern: patternOf(path), methods: ["POST"] })
  }
  if (metrics !== undefined) {
    // Prometheus text, behind its own bearer token (metrics.token): never served to the world (docs/operations.md#metrics).
    const exposition = { "content-type": "text/plain; version=0.0.4; charset=utf-8" }
    const refusal = metricsGate(settings.metricsToken)
    routes["/metrics"] = {
      GET: observed("/metrics", "GET", (req) => {
        const refused = refusal(req.headers.get("authorization"))
        return refused !== undefined ? closing(errorResponse(refused)) : new Response(metrics.render(), { headers: exposition })
      }),
    }
    known.push({ path: "/metrics", pattern: patternOf("/metrics"), methods: ["GET"] })
  }

  // The web console (README, Console): its page and assets under /console/, none of it when off.
  if (settings.consoleEnabled) {
    for (const [path, handler] of Object.entries(consoleRoutes(consolePage))) routes[path] = { GET: handler }
  }

  /** During a graceful shutdown, a request on a kept-alive connection is refused and the connection closed. */
  const shuttingDown = (errorOf: (e: ApiError) => Response) =>
    closing(errorOf(new ServiceUnavailable({ message: "The gateway is shutting down; retry on another instance" })))

  /** Over a cap on requests in flight: 503, retry in a second, and the connection closed. */
  const busy = (over: Refusal, errorOf: (e: ApiError) => Response) =>
    closing(
      errorOf(
        new ServiceUnavailable({
          message:
            over === "overall"
              ? `The gateway has ${settings.maxInFlight} requests in flight, its maximum; retry shortly`
              : `Your address has ${settings.maxInFlightPerIp} requests in flight, the maximum per client address; retry shortly`,
          retry_after: 1,
        }),
      ),
    )

  /** Anything no route takes: a browser's preflight on a known path, else 405 on a known path, else 404, both in the envelope. */
  const unmatched = observed("unmatched", "ANY", (req) => {
    const path = new URL(req.url).pathname
    const match = known.find((k) => k.pattern.test(path))
    if (match !== undefined && req.method === "OPTIONS" && req.headers.has("origin") && req.headers.has("access-control-request-method")) {
      return cors.preflight(req, match.path, match.methods, match.errorOf !== undefined)
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

  const table: RouteTable = {
    routes,
    fetch: unmatched,
    error: () => errorResponse(new InternalError({ message: "Internal server error" })),
  }
  return {
    table,
    runtime,
    settings,
    lifecycle,
    metrics,
    generations,
    createdSecret: booted.createdSecret,
    /** Binds the server requests come through (before the first request). */
    bind: (ctx: RequestContext) => {
      context = ctx
    },
    /** From now on every request is refused as the gateway shutting down. */
    drainRequests: () => {
      draining = true
    },
  }
}

export type Gateway = Awaited<ReturnType<typeof makeGateway>>

export const startServer = async (config: Layer.Layer<GatewayConfig, unknown>, options: ServerOptions = {}) => {
  const gateway = await makeGateway(config, { formats: options.formats })
  const { table, runtime, settings, lifecycle, metrics, generations } = gateway
  const server = Bun.serve({
    port: options.port ?? settings.port,
    hostname: settings.host,
    reusePort: options.reusePort ?? false,
    // We enforce the body limit ourselves (Bun's own 413 has no envelope); this is a backstop.
    maxRequestBodySize: settings.maxBodyBytes * 2 + 1024,
    // Silence on a connection closes it; an authenticated request's own deadlines replace it while it runs.
    idleTimeout: settings.idleTimeoutS,
    routes: table.routes,
    fetch: table.fetch,
    error: table.error,
  })
  gateway.bind(server)
  // Autotuned, a client connection's send buffer takes MBs of an answer its client never reads,
  // whose text the gateway keeps for the terminal events: fixed, what such a stream holds is bounded.
  if (settings.sendBufferBytes > 0) {
    const notSet = limitSendBuffers(server.port as number, settings.sendBufferBytes)
    if (notSet !== undefined) await runtime.runPromise(Effect.logWarning(`server.send_buffer_bytes is not applied: ${notSet}`))
  }
  // And what the kernel queues of it that is not on its way yet (all of it, for a client whose window is closed).
  if (settings.unsentLowWaterBytes > 0) {
    const notSet = limitUnsentBytes(server.port as number, settings.unsentLowWaterBytes)
    if (notSet !== undefined) await runtime.runPromise(Effect.logWarning(`server.unsent_low_water_bytes is not applied: ${notSet}`))
  }

  return {
    server,
    port: server.port as number,
    url: `http://${settings.host === "0.0.0.0" ? "127.0.0.1" : settings.host}:${server.port}`,
    settings,
    runtime,
    createdSecret: gateway.createdSecret,
    /** Waits for in-flight settlements, then makes every queued generation record durable. */
    drain: async () => {
      await lifecycle.drain()
      await runtime.runPromise(Effect.flatMap(GenerationStore, (g) => g.flush))
    },
    stop: async () => {
      await server.stop(true)
      await lifecycle.drain()
      await runtime.dispose()
      logWriter.flush()
    },
    /**
     * Graceful shutdown (SIGTERM): stop accepting connections, let requests and open streams
     * finish for up to `graceMs`, end the streams still open with `response.failed`
     * (server_shutting_down) and [DONE], cut what is still open (recorded as cancelled), make
     * every generation record durable, close the store. Resolves with how many requests were cut.
     */
    shutdown: async (graceMs: number = settings.shutdownGraceMs): Promise<{ readonly cut: number }> => {
      gateway.drainRequests()
      void server.stop(false)
      await lifecycle.idle(graceMs)
      const cut = lifecycle.count
      // A stream's client gets a terminal event rather than a reset; its last bytes get a moment to leave.
      if (lifecycle.cutStreams() > 0) await flushed(server, 1_000)
      await server.stop(true)
      // Streams cut just now end (and settle) on their cancel callbacks.
      await lifecycle.idle(1_000)
      await lifecycle.drain()
      await runtime.runPromise(generations.flush)
      await runtime.dispose()
      logWriter.flush()
      return { cut }
    },
    /** The counters behind GET /metrics (undefined when GATEWAY_METRICS=off). */
    metrics,
  }
}

/** Resolves once Bun has no request in progress (a closed stream's last bytes sent), or after `ms`. */
const flushed = async (server: Bun.Server<undefined>, ms: number): Promise<void> => {
  const until = performance.now() + ms
  while (server.pendingRequests > 0 && performance.now() < until) await Bun.sleep(10)
}

export type RunningServer = Awaited<ReturnType<typeof startServer>>
