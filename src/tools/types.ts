/**
 * A server tool: a tool the gateway runs on the model's behalf (docs/server-tools.md). The model is offered it
 * as a function tool (`name`, `description`, `parameters`); when the model calls it, the loop runs
 * `run` and gives the model `modelOutput` as the call's result, while the client receives `item`
 * as the output item the official SDK validates (`openrouter:web_search`, `openrouter:web_fetch`,
 * `openrouter:datetime`, …). The two are separate shapes on purpose.
 */
import type { Settings } from "../config/Config.js"
import type { InnerCalls, ParentCall } from "./inner-calls.js"

/** What a tool may use while it runs; `Progress`: the events it reports (its module declares them). */
export interface ServerToolContext<Progress extends ServerToolProgressEvent = ServerToolProgressEvent> {
  readonly settings: Settings
  /** Aborted when the client goes away or the request's deadline passes. */
  readonly signal: AbortSignal
  readonly workspaceId: string
  /** Calls of this tool earlier in this request (for a per-request cap such as web_fetch's `max_uses`). */
  readonly callsSoFar: number
  /**
   * Tells the client how the call is going, as it happens (a streamed Responses answer writes each
   * as the SDK's event, `response.<eventPrefix>.<event>`). Absent when nobody listens (not streamed,
   * or a format without such events): a tool calls it as `ctx.progress?.(…)`.
   */
  readonly progress?: (progress: Progress) => void
}

/**
 * What the loop adds for a tool that makes model calls of its own (fusion's panel and judge): the
 * inner calls and the request they are made for. Such a tool checks for them (`innerCalls in ctx`)
 * and fails its call without them.
 */
export interface ModelCallingContext<Progress extends ServerToolProgressEvent = ServerToolProgressEvent> extends ServerToolContext<Progress> {
  readonly innerCalls: InnerCalls
  /** The request the tool's calls are made for (their parent generation, key, budget). */
  readonly parent: ParentCall
  /** The request's model. */
  readonly model: string | undefined
  /** The workspace's `disabled_server_tools`. */
  readonly disabledServerTools?: ReadonlyArray<string>
}

/**
 * One progress event of a running call, named as the official SDK names it after the tool's
 * `eventPrefix` (`searching` → `response.web_search_call.searching`), with its wire fields besides
 * `item_id`, `output_index` and `sequence_number` (the encoder adds those). The `in_progress` and
 * `completed` events of a tool with an `eventPrefix` are the encoder's, at the item's start and done.
 * Each tool's module declares its own events; their union over the registry is `ServerToolProgress`
 * (index.ts).
 */
export interface ServerToolProgressEvent {
  readonly event: string
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

/**
 * `Type`: its `openrouter:<name>` (a literal, so the registry's `ServerToolType` union lists it);
 * `Progress`: the events it reports through `ctx.progress`, when it has an `eventPrefix`.
 */
export interface ServerTool<Type extends string = string, Progress extends ServerToolProgressEvent = ServerToolProgressEvent> {
  readonly type: Type
  /** The function name the model is offered and calls (e.g. `web_search`). */
  readonly name: string
  /**
   * Other `tools[]` types that name it, whose other fields are its parameters (OpenAI's `web_search`
   * and `web_search_preview` for web search). Absent: only the prefixed names.
   */
  readonly aliases?: ReadonlyArray<string>
  readonly description: string
  /** JSON schema of the call's arguments, as offered to the model. */
  readonly parameters: Readonly<Record<string, unknown>>
  /**
   * The prefix of the SDK's progress events for this tool's item in a Responses stream
   * (`web_search_call` → `response.web_search_call.in_progress`, `.searching`, `.completed`).
   * Absent: the item has only `output_item.added` and `output_item.done` (web_fetch, datetime).
   */
  readonly eventPrefix?: string
  /**
   * Its progress events are OpenAI's own (`web_search_call`), which the `openai` JS client's stream
   * helper knows. Absent: that client (which throws on an event it does not know) is not sent them.
   */
  readonly openaiProgress?: boolean
  /**
   * The item's fields known before the call runs, for its `output_item.added` (in progress): what
   * the SDK's item schema requires beyond `type`, `id` and `status` (datetime's `timezone` and
   * `datetime`). Absent: none.
   */
  readonly opening?: (args: unknown, toolParameters: Readonly<Record<string, unknown>>) => Readonly<Record<string, unknown>>
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
  readonly run: (args: unknown, toolParameters: Readonly<Record<string, unknown>>, ctx: ServerToolContext<Progress>) => Promise<ServerToolResult>
}

/** One server tool of the request, with the client's `parameters` for it. */
export interface DeclaredTool {
  readonly tool: ServerTool
  readonly parameters: Readonly<Record<string, unknown>>
}
