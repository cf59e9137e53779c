/**
 * The server tools this gateway runs, one file each (docs/server-tools.md): a new tool is its module and
 * one line here. A tool type of the contract that is not listed here is a 400 naming it, never silently
 * dropped. The unions of the tools' types and progress events derive from this list.
 */
import { datetimeTool } from "./datetime.js"
import { fusionTool } from "./fusion.js"
import { namesTool, toolTypeLookup } from "./names.js"
import type { ServerTool, ServerToolProgressEvent } from "./types.js"
import { webFetchTool } from "./web-fetch.js"
import { webSearchTool } from "./web-search.js"

export const serverTools = [
  datetimeTool,
  webSearchTool,
  webFetchTool,
  fusionTool,
] as const

type Registered = (typeof serverTools)[number]

/** The tool types as clients of the hosted service send them (the output items use these too). */
export type ServerToolType = Registered["type"]

/** The progress events of a tool that declares its own (a tool without, `ServerTool<Type>`, adds none). */
type ProgressOf<Tool> = Tool extends ServerTool<string, infer Progress> ? (ServerToolProgressEvent extends Progress ? never : Progress) : never

/** Every progress event the registered tools report (`searching`, `panel.added`, …). */
export type ServerToolProgress = ProgressOf<Registered>

const byType = new Map<string, ServerTool>(serverTools.map((tool) => [tool.type, tool]))
let typeOf = toolTypeLookup(serverTools)

/** The tool of a type as clients send it (`openrouter:…`), or undefined. */
export const serverToolOf = (type: ServerToolType | string): ServerTool | undefined => byType.get(type)

/** A `tools[]` type → the server tool type it names (`openrouter:<name>`), or undefined when it names none. */
export const serverToolTypeOf = (type: unknown): string | undefined => typeOf(type)

/**
 * The contract's service-provided server tools, those this gateway runs and those it does not: a
 * workspace may turn any of them off (`disabled_server_tools`), as its settings may be shared with
 * the hosted service.
 */
const CONTRACT_SERVER_TOOLS = [
  "advisor", "subagent", "datetime", "files", "fusion", "image_generation", "search_models",
  "web_fetch", "web_search", "apply_patch", "bash", "shell",
].map((name) => ({ name, type: `openrouter:${name}` }))

/** The contract's server tool names, for a refusal that lists them. */
export const SERVER_TOOL_NAMES = CONTRACT_SERVER_TOOLS.map((tool) => tool.name).join(", ")

/** Whether a workspace's `disabled_server_tools` entry names a server tool: one of the contract's or of this gateway's, by any of its names (`namesTool`). */
export const isServerToolName = (name: string): boolean =>
  CONTRACT_SERVER_TOOLS.some((tool) => namesTool(name, tool)) || [...byType.values()].some((tool) => namesTool(name, tool))

/**
 * Runs `tool` beside the listed ones, from when this is called (at start, before the gateway serves):
 * for a tool an embedder of the gateway keeps outside this tree, and for tests. Returns its removal.
 * A tool of the gateway itself takes its line in `serverTools` instead.
 */
export const registerServerTool = (tool: ServerTool): (() => void) => {
  if (byType.has(tool.type)) throw new Error(`server tool ${tool.type} is already registered`)
  const rebuild = () => {
    typeOf = toolTypeLookup([...byType.values()])
  }
  byType.set(tool.type, tool)
  rebuild()
  return () => {
    if (byType.get(tool.type) !== tool) return
    byType.delete(tool.type)
    rebuild()
  }
}
