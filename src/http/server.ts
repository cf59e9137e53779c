/**
 * One Bun server, two planes (docs/pipeline.md). The front door is Bun's router: every control
 * endpoint of the HttpApi is a route to its web handler, POST /v1/responses is a native
 * route, and anything else is a 404 or 405 in the spec's envelope. Bodies over the maximum
 * are refused with 413 before they are read.
 */
import { HttpApiBuilder, HttpApp } from "@effect/platform"
import { Context, Effect, Layer, ManagedRuntime } from "effect"
import { appLayer } from "../app.js"
import { Broadcast } from "../broadcast/Broadcast.js"
import { OwnTraces } from "../broadcast/own-traces.js"
import { GatewayConfig } from "../config/Config.js"
import type { DestinationKind } from "../broadcast/exporter.js"
import { formats as mountedFormats, type MountedFormat } from "../formats/index.js"
import { bootstrap } from "../services/bootstrap.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { KeyStore } from "../services/KeyStore.js"
import { Auth } from "../services/Auth.js"
import { Catalog } from "../services/Catalog.js"
import { DEFAULT_MAX_UNFINISHED_BODIES, makeBodyDeadline, UnfinishedBodies } from "../pipeline/body.js"
import { loggerLayer, logWriter, makeErrorLog } from "../lib/log.js"
import { makeRequestLogger } from "./request-log.js"
import { GatewayMetrics } from "./metrics.js"
import { RequestLifecycle } from "../pipeline/lifecycle.js"
import { makeModelRoute } from "../pipeline/route.js"
import { makeCountTokensRoute } from "./messages/count-tokens.js"
import { makeModelAnswers } from "./models/answers.js"
import { makeAnthropicModelListRoute } from "./models/list.js"
import { makeModelRetrieveRoute } from "./models/retrieve.js"
import { makeEmbeddingRoutes } from "./embeddings/routes.js"
import { limitSendBuffers, limitUnsentBytes } from "../providers/socket-buffers.js"
import { makeCors } from "./cors.js"
import { authenticatedOn, type FrontDoor, type RequestContext } from "./front-door.js"
import { makeRouteTable } from "./route-table.js"
import consolePage from "../console/index.html"
import { consoleRoutes } from "./console.js"

export type { RequestContext } from "./front-door.js"
export type { RouteHandler, RouteTable } from "./route-table.js"

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
  /** The destination kinds (default: the registry, src/broadcast/exporters/index.ts). */
  readonly destinationKinds?: ReadonlyArray<DestinationKind>
}

/** Until `bind`: no client address, no idle timeout to lift. */
const UNBOUND: RequestContext = {
  requestIP: () => null,
  timeout: () => {},
}

/**
 * The gateway's program and route table, before any socket: `startServer` serves it; the test kit
 * calls it in-process. The services are built, then the front door's shared state
 * (src/http/front-door.ts), the control guard (src/http/control-guard.ts) and every route's
 * handler, once (src/http/route-table.ts).
 */
export const makeGateway = async (config: Layer.Layer<GatewayConfig, unknown>, options: GatewayOptions = {}) => {
  // The services' own logs: JSON lines at the configured level, like the request lines.
  const logging = Layer.unwrapEffect(Effect.map(GatewayConfig, (s) => loggerLayer(s.logLevel))).pipe(Layer.provide(config))
  const app = appLayer(config, options.destinationKinds).pipe(Layer.provide(logging))
  const runtime = ManagedRuntime.make(options.layer === undefined ? app : app.pipe(Layer.provide(options.layer), Layer.merge(options.layer)))
  const rt = await runtime.runtime()
  const settings = Context.get(rt.context, GatewayConfig)
  const booted = await runtime.runPromise(bootstrap)
  const controlApp = await runtime.runPromise(HttpApiBuilder.httpApp)
  const control = HttpApp.toWebHandlerRuntime(rt)(controlApp)
  const generations = Context.get(rt.context, GenerationStore)
  const keyStore = Context.get(rt.context, KeyStore)
  const broadcast = Context.get(rt.context, Broadcast)

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
  // Requests in progress (streams until their last event): capped, settled once, and awaited by a graceful shutdown.
  const lifecycle = new RequestLifecycle(settings.maxInFlight, settings.maxInFlightPerIp, (req) => front.context.requestIP(req)?.address ?? "")
  const front: FrontDoor = {
    settings,
    metrics,
    logRequest: makeRequestLogger(settings.logLevel),
    keepBodies: settings.logLevel === "debug",
    ownTraces: Context.get(rt.context, OwnTraces),
    lifecycle,
    generations,
    cors: makeCors(settings.corsOrigins),
    context: UNBOUND,
    draining: false,
  }
  const authenticated = authenticatedOn(front)
  // Bodies still arriving after the key was accepted, per key and per client address (docs/operations.md).
  const bodies = new UnfinishedBodies(
    settings.catalog.server?.max_unfinished_bodies_per_key ?? DEFAULT_MAX_UNFINISHED_BODIES.perKey,
    settings.catalog.server?.max_unfinished_bodies_per_ip ?? DEFAULT_MAX_UNFINISHED_BODIES.perAddress,
    (req) => front.context.requestIP(req)?.address ?? "",
  )

  // Each model's answers to the clients' model endpoints, encoded once for the routes that serve them.
  const modelAnswers = makeModelAnswers(Context.get(rt.context, Catalog))
  const table = makeRouteTable({
    front,
    guard: {
      auth: Context.get(rt.context, Auth),
      runtime,
      control,
      maxBodyBytes: settings.maxBodyBytes,
      bodyTimeoutMs: settings.bodyTimeoutMs,
      bodyDeadline: makeBodyDeadline(settings.bodyTimeoutMs, settings.maxBodyBytes),
      bodies,
      authenticated,
      readTimeoutMs: settings.commitTimeoutMs,
    },
    formats: options.formats ?? mountedFormats,
    responses: makeModelRoute(rt, { settings, lifecycle, log: makeErrorLog(settings.logLevel), authenticated, bodies }),
    countTokens: makeCountTokensRoute(rt, settings, bodies),
    retrieveModel: makeModelRetrieveRoute(rt, modelAnswers),
    anthropicModelList: makeAnthropicModelListRoute(rt, modelAnswers),
    embeddings: makeEmbeddingRoutes(rt, { settings, lifecycle, log: makeErrorLog(settings.logLevel), authenticated }),
    console: settings.consoleEnabled ? consoleRoutes(consolePage) : undefined,
  })
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
      front.context = ctx
    },
    /** From now on every request is refused as the gateway shutting down. */
    drainRequests: () => {
      front.draining = true
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
