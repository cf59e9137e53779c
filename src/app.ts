/**
 * The service graph, composed once: main.ts runs it with live config, tests with theirs.
 * Both planes of the server share this one runtime (one Auth, one key cache, one store).
 */
import { HttpApiBuilder, HttpServer } from "@effect/platform"
import { Layer, RuntimeFlags } from "effect"
import { GatewayConfig } from "./config/Config.js"
import { GatewayApi } from "./http/Api.js"
import { AuthenticationLive } from "./http/api/security.js"
import { ErrorMappingLive } from "./http/errors.js"
import { HealthLive } from "./http/handlers/health.js"
import { KeysLive } from "./http/handlers/keys.js"
import { Auth } from "./services/Auth.js"
import { KeyStore } from "./services/KeyStore.js"
import { Users } from "./services/Users.js"
import { StoreLive } from "./store/Store.js"

/** Domain services over the store. */
export const ServicesLayer = Layer.mergeAll(Auth.Default, KeyStore.Default, Users.Default)

/** The control plane's HttpApi with its handlers and middleware. */
export const ControlPlaneLayer = HttpApiBuilder.api(GatewayApi).pipe(
  Layer.provide([KeysLive, HealthLive]),
  Layer.provide(AuthenticationLive),
)

/** Everything a server needs, given the config layer. */
export const appLayer = (config: Layer.Layer<GatewayConfig, unknown>) => {
  const store = StoreLive.pipe(Layer.provide(config))
  const services = ServicesLayer.pipe(Layer.provideMerge(store))
  return Layer.mergeAll(
    ControlPlaneLayer,
    ErrorMappingLive,
    HttpApiBuilder.Router.Live,
    HttpApiBuilder.Middleware.layer,
    HttpServer.layerContext,
    // No server spans or per-fiber runtime metrics unless traces are exported (DESIGN §4).
    Layer.setTracerEnabled(false),
    RuntimeFlags.disableRuntimeMetrics,
  ).pipe(Layer.provideMerge(services), Layer.provideMerge(config))
}
