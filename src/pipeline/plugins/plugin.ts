/**
 * A request plugin (docs/plugins.md, docs/architecture.md "Extension points"): one module holding
 * its entry of the request's `plugins` (a Schema), its pre-model half (a stage over the request's
 * state), its post-model half (over the answer's events), both built once from the gateway's
 * settings; one line in the registry (index.ts). Nothing else names it: its per-request state
 * goes in its slot of the request's `Loaded` (`requestSlot`), its routing change is a
 * `StageChange` like any other.
 */
import { Schema } from "effect"
import type { Settings } from "../../config/Config.js"
import { BadRequest } from "../../domain/errors.js"
import type { ResponsesRequest } from "../../domain/responses.js"
import type { InnerCalls } from "../../tools/inner-calls.js"
import type { Loaded, PipelineEntry, PostModelRun, StageOutcome, StageState } from "../stages.js"

/** What a plugin's halves are built from, once per gateway (the route's own). */
export interface PluginDeps {
  readonly settings: Settings
  /** Model calls on the request's behalf (fusion's panel); undefined where a test builds the stages alone. */
  readonly innerCalls?: InnerCalls
}

/** Every plugin entry, decoded: its id, and `enabled` filled in (default true). */
export interface PluginConfig {
  readonly id: string
  readonly enabled: boolean
}

/** The fields every plugin entry has: its id, and `enabled` (default true; false turns it off for this request). */
export const pluginFields = <const Id extends string>(id: Id) => ({
  id: Schema.Literal(id),
  enabled: Schema.optionalWith(Schema.Boolean, { default: () => true }),
})

export interface PreModelHalf<Config> {
  /** It reads the route plan (e.g. a router narrowing the candidates): the request is routed first. */
  readonly needsPlan: boolean
  /** `config`: its entry as decoded; `at`: its index in `plugins`, for messages that name the field. */
  readonly run: (config: Config, state: StageState, at: number) => StageOutcome
}

/**
 * Its run over the answer of a request that lists it enabled (`config`: its last entry, decoded):
 * each upstream batch → the batch the encoder gets; undefined when it does not apply to this
 * request after all. `report` adds an entry to `service_metadata.pipeline`.
 */
export type PostModelHalf<Config> = (config: Config, request: ResponsesRequest, report: (entry: PipelineEntry) => void) => PostModelRun | undefined

export interface RequestPlugin<Id extends string = string, Config extends PluginConfig = PluginConfig> {
  readonly id: Id
  /** Its entry of the request's `plugins`: the validator, the type and the rules a 400 quotes. */
  // biome-ignore lint/suspicious/noExplicitAny: the entry's wire form is the Schema's own business
  readonly schema: Schema.Schema<Config, any>
  /** Its stage before the model, for a request that lists it enabled. */
  readonly pre?: (deps: PluginDeps) => PreModelHalf<Config>
  /** Its stage over the answer's events, for a request that lists it enabled. */
  readonly post?: (deps: PluginDeps) => PostModelHalf<Config>
}

/** The entry of plugin `Id` (its Schema's decoded type). */
export type ConfigOf<P> = P extends RequestPlugin<string, infer Config> ? Config : never

/**
 * A plugin's per-request state, in the request's own `Loaded` under the plugin's id: it lives as
 * long as the request and survives the stages running again after a load.
 */
export const requestSlot = <T>(id: string) => ({
  get: (loaded: Loaded): T | undefined => loaded.plugins?.get(id) as T | undefined,
  set: (loaded: Loaded, value: T): void => {
    if (loaded.plugins === undefined) loaded.plugins = new Map()
    loaded.plugins.set(id, value)
  },
})

/** A plugin this gateway cannot run here: a 400 naming it, never a request silently served without it. */
export const notAvailable = <Config extends PluginConfig>(id: string): PreModelHalf<Config> => {
  const message = `plugin ${id} is not available on this gateway`
  return {
    needsPlan: false,
    run: (_config, _state, at) => new BadRequest({ message: `Invalid request: plugins[${at}]: ${message}` }),
  }
}
