/**
 * A server tool: a tool the gateway runs on the model's behalf (issue 24). The model is offered it
 * as a function tool (`name`, `description`, `parameters`); when the model calls it, the loop runs
 * `run` and gives the model `modelOutput` as the call's result, while the client receives `item`
 * as the output item the official SDK validates (`openrouter:web_search`, `openrouter:web_fetch`,
 * `openrouter:datetime`, …). The two are separate shapes on purpose.
 */
import type { Settings } from "../config/Config.js"

/** The tool types as clients of the hosted service send them (the output items use these too). */
export type ServerToolType = "openrouter:web_search" | "openrouter:web_fetch" | "openrouter:datetime" | "openrouter:fusion"

/** What a tool may use while it runs. */
export interface ServerToolContext {
  readonly settings: Settings
  /** Aborted when the client goes away or the request's deadline passes. */
  readonly signal: AbortSignal
  readonly workspaceId: string
  /** Calls of this tool earlier in this request (for a per-request cap such as web_fetch's `max_uses`). */
  readonly callsSoFar: number
}

/** One citable source a tool returned: links the answer cites that match one become `url_citation` annotations. */
export interface Citable {
  readonly url: string
  readonly title: string
}

export interface ServerToolResult {
  /** What the model is given as the function call's output (text; JSON text where structured). */
  readonly modelOutput: string
  /** The client's output item, without `id` (the loop assigns it) but with its `type` and `status`. */
  readonly item: Readonly<Record<string, unknown>>
  /** USD the tool itself cost (its configured price), charged to the key on top of the model turns. */
  readonly cost: number
  /** For the generation record and `usage.server_tool_use_details`. */
  readonly searchRequests?: number
  readonly searchResults?: number
  readonly fetches?: number
  readonly searchEngine?: string
  readonly citable?: ReadonlyArray<Citable>
}

export interface ServerTool {
  readonly type: ServerToolType
  /** The function name the model is offered and calls (e.g. `web_search`). */
  readonly name: string
  readonly description: string
  /** JSON schema of the call's arguments, as offered to the model. */
  readonly parameters: Readonly<Record<string, unknown>>
  /**
   * Why this tool cannot run on this gateway (e.g. "web search is not configured on this gateway"),
   * checked when the request is decoded: such a request is a 400 naming the tool. Undefined: it can run.
   */
  readonly unavailable: (settings: Settings) => string | undefined
  /**
   * What is wrong with the client's `parameters` for it (the field and the rule), checked when the
   * request is decoded: a 400 naming `tools[i].parameters`. Absent or undefined: they are fine.
   * `disabled`: the workspace's `disabled_server_tools` (fusion's panel may not name one).
   */
  readonly parametersProblem?: (parameters: Readonly<Record<string, unknown>>, settings: Settings, disabled: ReadonlyArray<string>) => string | undefined
  /**
   * Runs one call. `args`: the model's arguments (parsed JSON, untrusted); `toolParameters`: the
   * `parameters` object of the request's `tools[]` entry (the client's settings, e.g. max_results).
   * Never rejects for a bad argument or a failed fetch: that is a failed tool result the model sees.
   */
  readonly run: (args: unknown, toolParameters: Readonly<Record<string, unknown>>, ctx: ServerToolContext) => Promise<ServerToolResult>
}
