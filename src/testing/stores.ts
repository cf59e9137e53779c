/**
 * Service-level test layers: one store service (or all of them) over the in-memory SQLite store,
 * for a test of one service without the HTTP pipeline (docs/testing.md). Each layer makes a
 * fresh database; `preparerOf` builds the data plane's pre-model stage from a services runtime.
 */
import { Context, Layer, type ManagedRuntime } from "effect"
import { ServicesLayer } from "../app.js"
import { GatewayConfig, type Settings, testSettings } from "../config/Config.js"
import { pluginSetOf } from "../pipeline/plugins/index.js"
import { makePreparer } from "../pipeline/pre-model.js"
import { Router } from "../routing/Router.js"
import { ContentPolicy } from "../services/ContentPolicy.js"
import { Destinations } from "../services/Destinations.js"
import { GenerationStore } from "../services/GenerationStore.js"
import { Guardrails } from "../services/Guardrails.js"
import { KeyStore } from "../services/KeyStore.js"
import { PresetStore } from "../services/PresetStore.js"
import { Spend } from "../services/Spend.js"
import { WorkspaceStore } from "../services/WorkspaceStore.js"
import { StoreLive } from "../store/Store.js"

/** The config of a service-level test: the test defaults over `:memory:` (override `databaseUrl` for a file or Postgres). */
export const testConfig = (settings: Partial<Settings> = {}) => GatewayConfig.layer(testSettings({ databaseUrl: ":memory:", ...settings }))

/** Every domain service over a fresh store (the gateway's own graph, without HTTP). */
export const servicesLayer = (settings: Partial<Settings> = {}) =>
  ServicesLayer.pipe(Layer.provideMerge(StoreLive), Layer.provideMerge(testConfig(settings)))

/** Only `tag` of the services (the rest built under it, as the gateway builds them). */
const only =
  <I, S>(tag: Context.Tag<I, S>) =>
  (settings: Partial<Settings> = {}): Layer.Layer<I, unknown> =>
    Layer.effect(tag, tag).pipe(Layer.provide(servicesLayer(settings) as Layer.Layer<I, unknown>))

/** One store service over a fresh in-memory store: `Effect.provide(StoreTest.keys())`. */
export const StoreTest = {
  all: servicesLayer,
  keys: only(KeyStore),
  workspaces: only(WorkspaceStore),
  presets: only(PresetStore),
  generations: only(GenerationStore),
  destinations: only(Destinations),
} as const

type ServicesRuntime = ManagedRuntime.ManagedRuntime<KeyStore | ContentPolicy | PresetStore | Router | Guardrails | Spend, unknown>

/** The pre-model stage (`makePreparer`) over a runtime of the services, as the data plane builds it. */
type AfterServices<T> = T extends [unknown, ...infer R] ? R : never

type PreparerRest = AfterServices<Parameters<typeof makePreparer>>

/** `plugins` left out: the registry's, built from the test settings. */
export const preparerOf = async (
  runtime: ServicesRuntime,
  parts?: PreparerRest[0],
  plugins?: PreparerRest[1],
  ...rest: PreparerRest extends [unknown, unknown, ...infer R] ? R : never
) => {
  const rt = await runtime.runtime()
  return makePreparer(
    {
      keys: Context.get(rt.context, KeyStore),
      policy: Context.get(rt.context, ContentPolicy),
      presets: Context.get(rt.context, PresetStore),
      router: Context.get(rt.context, Router),
      guardrails: Context.get(rt.context, Guardrails),
      spend: Context.get(rt.context, Spend),
    },
    parts,
    plugins ?? pluginSetOf({ settings: testSettings() }),
    ...rest,
  )
}
