/**
 * The plugin registry: one line per plugin (`requestPlugins`), and what is assembled from it once,
 * above the domain: the ids, the Schema of an entry of the request's `plugins` (the domain keeps
 * `plugins` an array of objects and leaves each entry to its plugin), and a gateway's `PluginSet`
 * (each plugin's halves built from the gateway's settings).
 */
import { Either, Schema } from "effect"
import type { BadRequest } from "../../domain/errors.js"
import type { PluginEntry, ResponsesRequest } from "../../domain/responses.js"
import { AnyRecord, oneOf } from "../../domain/schema-rules.js"
import { makeDecoder } from "../../domain/validation.js"
import type { PostModelStage, PreModelStage, StageOutcome, StageState } from "../stages.js"
import { autoRouterPlugin } from "./auto-router.js"
import { contextCompressionPlugin } from "./context-compression.js"
import { fileParserPlugin } from "./file-parser.js"
import { fusionPlugin } from "./fusion.js"
import { moderationPlugin } from "./moderation.js"
import { paretoRouterPlugin } from "./pareto-router.js"
import type { ConfigOf, PluginConfig, PluginDeps, PostModelHalf, PreModelHalf, RequestPlugin } from "./plugin.js"
import { responseHealingPlugin } from "./response-healing.js"
import { webFetchPlugin } from "./web-fetch.js"
import { webPlugin } from "./web.js"

/** The plugins a request may list, one line each (in this order in the message naming the allowed ids). */
export const requestPlugins = [
  autoRouterPlugin,
  contextCompressionPlugin,
  fileParserPlugin,
  fusionPlugin,
  moderationPlugin,
  paretoRouterPlugin,
  responseHealingPlugin,
  webPlugin,
  webFetchPlugin,
] as const

export type PluginId = (typeof requestPlugins)[number]["id"]
/** An entry of the request's `plugins`, decoded by its plugin's Schema. */
export type Plugin = ConfigOf<(typeof requestPlugins)[number]>

export const pluginIds: ReadonlyArray<PluginId> = requestPlugins.map((p) => p.id)

/** Plugins an extender (or a test) adds before the gateway starts: read once, when a `PluginSet` is made. */
const registered: Array<RequestPlugin> = []

/** Adds `plugin` to the plugins of every gateway started after it; the function returned takes it out again. */
export const registerPlugin = <Id extends string, Config extends PluginConfig>(plugin: RequestPlugin<Id, Config>): (() => void) => {
  const entry = plugin as unknown as RequestPlugin
  registered.push(entry)
  return () => {
    const at = registered.indexOf(entry)
    if (at >= 0) registered.splice(at, 1)
  }
}

/** The Schema of one entry of `plugins` over `list`: the id is checked first, so an unknown id is refused with the allowed ids. */
const entrySchemaOf = (list: ReadonlyArray<RequestPlugin>): Schema.Schema<PluginConfig, unknown> => {
  const ids = list.map((p) => p.id) as unknown as readonly [string, ...Array<string>]
  const head = Schema.Struct({ id: oneOf(...ids) }, AnyRecord).annotations({
    message: () => "a plugin object with an id",
  })
  const members = list.map((p) => p.schema) as unknown as [Schema.Schema.AnyNoContext, ...Array<Schema.Schema.AnyNoContext>]
  return Schema.compose(head, Schema.Union(...members), { strict: false }) as unknown as Schema.Schema<
    PluginConfig,
    unknown
  >
}

/** `plugins` decoded by each entry's Schema: the 400 names `plugins[i]` and the rule, as the body's other fields do. */
const pluginsDecoderOf = (list: ReadonlyArray<RequestPlugin>) => {
  const decode = makeDecoder(Schema.Struct({ plugins: Schema.Array(entrySchemaOf(list)) }))
  return (entries: ReadonlyArray<PluginEntry>): Either.Either<ReadonlyArray<PluginEntry>, BadRequest> =>
    Either.map(decode({ plugins: entries }), (decoded) => decoded.plugins as ReadonlyArray<PluginEntry>)
}

/** The registry's plugins decoded, with `enabled` and the defaults filled in (the presets' check: a stored preset holds them decoded). */
export const decodePlugins = pluginsDecoderOf(requestPlugins as unknown as ReadonlyArray<RequestPlugin>)

/** A plugin's post-model half as a stage: started only for a request whose last entry of the plugin is enabled. */
const postStageOf = (id: string, half: PostModelHalf<PluginConfig>): PostModelStage => ({
  name: id,
  start: (request, report) => {
    const entries = request.plugins
    if (entries === undefined) return undefined
    for (let at = entries.length - 1; at >= 0; at--) {
      const entry = entries[at] as PluginEntry
      if (entry.id === id) return entry.enabled === false ? undefined : half(entry as PluginConfig, request, report)
    }
    return undefined
  },
})

/** A gateway's plugins, built once from its settings: what the stages ask per request. */
export interface PluginSet {
  /**
   * The request with its `plugins` decoded by their Schemas (the same object when it lists none:
   * the common case costs one check), or the 400 naming the entry.
   */
  readonly decode: (request: ResponsesRequest) => ResponsesRequest | BadRequest
  /** The pre-model stage of the entry at `at` (decoded), or undefined when its plugin has none. */
  readonly stageOf: (config: PluginEntry, at: number) => PreModelStage | undefined
  /** The plugins' post-model halves, in registry order. */
  readonly post: ReadonlyArray<PostModelStage>
}

/** The plugins of a gateway: the registry's and those registered, their halves built from `deps`. */
export const pluginSetOf = (deps: PluginDeps, list: ReadonlyArray<RequestPlugin> = [...(requestPlugins as unknown as ReadonlyArray<RequestPlugin>), ...registered]): PluginSet => {
  const decode = pluginsDecoderOf(list)
  const pre = new Map<string, PreModelHalf<PluginConfig>>()
  const post: Array<PostModelStage> = []
  for (const plugin of list) {
    const half = plugin.pre?.(deps)
    if (half !== undefined) pre.set(plugin.id, half)
    const after = plugin.post?.(deps)
    if (after !== undefined) post.push(postStageOf(plugin.id, after))
  }
  return {
    decode: (request) => {
      if (request.plugins === undefined) return request
      const decoded = decode(request.plugins)
      return Either.isLeft(decoded) ? decoded.left : { ...request, plugins: decoded.right }
    },
    stageOf: (config, at) => {
      const half = pre.get(config.id)
      if (half === undefined) return undefined
      return {
        name: `plugin:${config.id}`,
        needsPlan: half.needsPlan,
        run: (state: StageState): StageOutcome => half.run(config as PluginConfig, state, at),
      }
    },
    post,
  }
}
