/**
 * The service graph, composed once: main.ts runs it with live config, tests with theirs.
 * Both planes of the server share this one runtime (one Auth, one key cache, one store).
 */
import { HttpApiBuilder, HttpRouter, HttpServer } from "@effect/platform"
import { Effect, Layer, RuntimeFlags } from "effect"
import { GatewayConfig } from "./config/Config.js"
import { GatewayApi } from "./http/Api.js"
import { AuthenticationLive } from "./http/api/security.js"
import { ErrorMappingLive } from "./http/errors.js"
import { HealthLive } from "./http/handlers/health.js"
import { KeysLive } from "./http/handlers/keys.js"
import { GenerationsLive } from "./http/handlers/generations.js"
import { DestinationsLive } from "./http/handlers/destinations.js"
import { WorkspacesLive } from "./http/handlers/workspaces.js"
import { PresetsLive } from "./http/handlers/presets.js"
import { ModelsLive, ProvidersLive } from "./http/handlers/models.js"
import { ActivityLive } from "./http/handlers/activity.js"
import { Activity } from "./services/Activity.js"
import { Router } from "./routing/Router.js"
import { Auth } from "./services/Auth.js"
import { Catalog } from "./services/Catalog.js"
import { ContentPolicy } from "./services/ContentPolicy.js"
import { Guardrails } from "./services/Guardrails.js"
import { Spend } from "./services/Spend.js"
import { KeyStore } from "./services/KeyStore.js"
import { Notifications } from "./services/Notifications.js"
import { RateLimits } from "./services/RateLimits.js"
import { SharedState } from "./services/SharedState.js"
import { GenerationStore } from "./services/GenerationStore.js"
import { Destinations } from "./services/Destinations.js"
import { Secrets } from "./services/secrets.js"
import { PresetStore } from "./services/PresetStore.js"
import { Users } from "./services/Users.js"
import { WorkspaceStore } from "./services/WorkspaceStore.js"
import { WorkspaceBudgets } from "./services/WorkspaceBudgets.js"
import { GenerationFeedback } from "./services/GenerationFeedback.js"
import { ModelUsage } from "./services/ModelUsage.js"
import { StoreLive } from "./store/Store.js"
import { Broadcast } from "./broadcast/Broadcast.js"
import type { DestinationKind } from "./broadcast/exporter.js"
import { DESTINATION_KINDS, destinationKindsLayer } from "./broadcast/exporters/index.js"
import { OwnTraces } from "./broadcast/own-traces.js"
import { Retention } from "./services/Retention.js"

/**
 * Domain services over the store, with the destination kinds they check and deliver (the
 * registry's, src/broadcast/exporters/index.ts, unless a test brings its own list).
 */
export const servicesWith = (destinationKinds: ReadonlyArray<DestinationKind> = DESTINATION_KINDS) => Layer.mergeAll(Auth.Default, KeyStore.Default, Users.Default,
  GenerationStore.Default, Secrets.Default, Destinations.Default, WorkspaceStore.Default, PresetStore.Default,
  WorkspaceBudgets.Default, GenerationFeedback.Default, ModelUsage.Default,
  // Reads of the usage rollup and the generation log (the activity endpoints, the console).
  Activity.Default,
  // The data plane: catalog, routing, money, content policy.
  Catalog.Live,
  Router.Default.pipe(Layer.provide(Catalog.Live)),
  // Spend hears key changes through KeyStore and waits for the ledger's settlements through
  // GenerationStore when it reconciles its budget slices (the same instances: layers are memoized).
  Spend.Default.pipe(Layer.provide(Layer.merge(KeyStore.Default, GenerationStore.Default))),
  ContentPolicy.Default,
  Guardrails.Live,
  // The same instance KeyStore hears key notices on (layers are memoized), for services and metrics.
  Notifications.Default,
  // Request rate limits per key, shared through Redis when it is configured (SharedState).
  RateLimits.Default,
  SharedState.Default,
  // The outbox hook on the ledger writer and the delivery worker (docs/broadcast.md).
  Broadcast.Default,
  // Deletes records and content past retention.* in the background (nothing when unset).
  Retention.Default,
  // The gateway's own traces, when OTEL_EXPORTER_OTLP_ENDPOINT is set.
  Layer.unwrapEffect(Effect.map(GatewayConfig, (s) => OwnTraces.layer(s.trustTraceparent))),
).pipe(Layer.provideMerge(destinationKindsLayer(destinationKinds)))

export const ServicesLayer = servicesWith()

/** The control plane's HttpApi with its handlers and middleware. */
export const ControlPlaneLayer = HttpApiBuilder.api(GatewayApi).pipe(
  Layer.provide([KeysLive, GenerationsLive, DestinationsLive, WorkspacesLive, HealthLive, PresetsLive, ModelsLive, ProvidersLive, ActivityLive]),
  Layer.provide(AuthenticationLive),
)

/** Everything a server needs, given the config layer (and the destination kinds, when not the registry's). */
export const appLayer = (config: Layer.Layer<GatewayConfig, unknown>, destinationKinds?: ReadonlyArray<DestinationKind>) => {
  const store = StoreLive.pipe(Layer.provide(config))
  const services = servicesWith(destinationKinds).pipe(Layer.provideMerge(store))
  return Layer.mergeAll(
    ControlPlaneLayer,
    ErrorMappingLive,
    HttpApiBuilder.Router.Live,
    HttpApiBuilder.Middleware.layer,
    HttpServer.layerContext,
    // No server spans or per-fiber runtime metrics unless traces are exported: each costs every request.
    Layer.setTracerEnabled(false),
    RuntimeFlags.disableRuntimeMetrics,
    // The router's default (100) would turn a long path parameter into "No such endpoint"
    // instead of a 400 naming the parameter (e.g. a 101-character preset slug).
    HttpRouter.setRouterConfig({ maxParamLength: 1024 }),
  ).pipe(Layer.provideMerge(services), Layer.provideMerge(config))
}
