/**
 * A plugin's stage: the contract's plugin object of its id (decoded: `enabled` filled in) and the
 * request's state → the stage's outcome (stages.ts). One file per plugin, one line in index.ts.
 */
import { BadRequest } from "../../domain/errors.js"
import type { Plugin, PluginId } from "../../domain/responses.js"
import type { StageOutcome, StageState } from "../stages.js"

export interface PluginStage<Id extends PluginId = PluginId> {
  readonly id: Id
  /** It reads the route plan (e.g. a router narrowing the candidates): the request is routed first. */
  readonly needsPlan: boolean
  /** `at`: the plugin's index in `plugins`, for messages that name the field. */
  readonly run: (config: Extract<Plugin, { readonly id: Id }>, state: StageState, at: number) => StageOutcome
}

/** A plugin this gateway does not have yet: a 400 naming it, never a request silently served without it. */
export const notAvailable = <Id extends PluginId>(id: Id): PluginStage<Id> => {
  const message = `plugin ${id} is not available on this gateway`
  return {
    id,
    needsPlan: false,
    run: (_config, _state, at) => new BadRequest({ message: `Invalid request: plugins[${at}]: ${message}` }),
  }
}
