/**
 * The plugin registry: every plugin id of the contract registers one stage, one file each. A
 * plugin is built by replacing its `notAvailable` stage in its file; the mapped type makes a
 * missing id a compile error.
 */
import type { Settings } from "../../config/Config.js"
import type { Plugin, PluginId } from "../../domain/responses.js"
import type { PreModelStage, StageOutcome, StageState } from "../stages.js"
import { autoRouterPlugin } from "./auto-router.js"
import { contextCompressionPlugin } from "./context-compression.js"
import { fileParserPlugin, makeFileParserPlugin } from "./file-parser.js"
import { fusionPlugin } from "./fusion.js"
import { moderationPlugin } from "./moderation.js"
import { paretoRouterPlugin } from "./pareto-router.js"
import type { PluginStage } from "./plugin.js"
import { responseHealingPlugin } from "./response-healing.js"
import { makeWebFetchPlugin, webFetchPlugin } from "./web-fetch.js"
import { makeWebPlugin, webPlugin } from "./web.js"

/** One stage per plugin id of the contract. */
export type PluginRegistry = { readonly [Id in PluginId]: PluginStage<Id> }

export const plugins: PluginRegistry = {
  "auto-router": autoRouterPlugin,
  "context-compression": contextCompressionPlugin,
  "file-parser": fileParserPlugin,
  fusion: fusionPlugin,
  moderation: moderationPlugin,
  "pareto-router": paretoRouterPlugin,
  "response-healing": responseHealingPlugin,
  web: webPlugin,
  "web-fetch": webFetchPlugin,
}

/** The registry with the plugins that read the gateway's settings (outbound policy, `search`, limits) built from them. */
export const pluginsFor = (settings: Settings): PluginRegistry => ({
  ...plugins,
  "file-parser": makeFileParserPlugin(settings),
  web: makeWebPlugin(settings),
  "web-fetch": makeWebFetchPlugin(settings),
})

/** The stage of the plugin at `at` of the request's `plugins` (its config as decoded). */
export const pluginStage = (registry: PluginRegistry, config: Plugin, at: number): PreModelStage => {
  const stage = registry[config.id] as PluginStage
  return {
    name: `plugin:${config.id}`,
    needsPlan: stage.needsPlan,
    run: (state: StageState): StageOutcome => (stage.run as (c: Plugin, s: StageState, i: number) => StageOutcome)(config, state, at),
  }
}
