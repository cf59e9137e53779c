/**
 * The server tools this gateway runs, one file each (docs/server-tools.md). A tool type of the contract that is
 * not listed here is a 400 naming it, never silently dropped.
 */
import { datetimeTool } from "./datetime.js"
import { fusionTool } from "./fusion.js"
import type { ServerTool, ServerToolType } from "./types.js"
import { webFetchTool } from "./web-fetch.js"
import { webSearchTool } from "./web-search.js"

export const serverTools: ReadonlyArray<ServerTool> = [
  datetimeTool,
  webSearchTool,
  webFetchTool,
  fusionTool,
]

const byType = new Map<string, ServerTool>(serverTools.map((tool) => [tool.type, tool]))

/** The tool of a type as clients send it (`openrouter:…`), or undefined. */
export const serverToolOf = (type: ServerToolType | string): ServerTool | undefined => byType.get(type)
