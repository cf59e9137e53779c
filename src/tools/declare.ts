/**
 * The server tools a request declares (docs/server-tools.md): `tools[]` entries of type
 * `openrouter:<name>` (what clients of the hosted service send), the same names under the
 * contract's `service:` and the gateway's `gateway:` prefixes, and OpenAI's `web_search` /
 * `web_search_preview` for the web search tool. A declared tool this gateway does not run, one
 * that is unavailable here, or one the workspace disabled is a 400 naming `tools[i]`. With the
 * tools: the loop's budget (`max_tool_calls`, `stop_server_tools_when`).
 */
import { Either, Schema } from "effect"
import type { Settings } from "../config/Config.js"
import { BadRequest } from "../domain/errors.js"
import type { ResponsesRequest } from "../domain/responses.js"
import { serverToolOf, serverToolTypeOf } from "./index.js"
import { namesTool } from "./names.js"
import type { DeclaredTool, ServerTool } from "./types.js"

export { serverToolTypeOf } from "./index.js"

/** The contract's default and hard cap of server-tool calls per request. */
export const MAX_TOOL_CALLS = 30

const positive = (what: string) => Schema.Number.pipe(Schema.positive({ message: () => `${what} must be a number > 0` }))
const count = (what: string) => Schema.Int.pipe(Schema.positive({ message: () => `${what} must be an integer ≥ 1` }))

/** `stop_server_tools_when`: any one condition that holds stops the loop (it can only stop earlier). */
export const StopCondition = Schema.Union(
  Schema.Struct({ type: Schema.Literal("step_count_is"), step_count: count("step_count") }),
  Schema.Struct({ type: Schema.Literal("has_tool_call"), tool_name: Schema.String.pipe(Schema.minLength(1)) }),
  Schema.Struct({ type: Schema.Literal("max_tokens_used"), max_tokens: count("max_tokens") }),
  Schema.Struct({ type: Schema.Literal("max_cost"), max_cost_in_dollars: positive("max_cost_in_dollars") }),
  Schema.Struct({ type: Schema.Literal("finish_reason_is"), reason: Schema.String.pipe(Schema.minLength(1)) }),
)
export type StopCondition = typeof StopCondition.Type
const decodeStopCondition = Schema.decodeUnknownEither(StopCondition)
const STOP_RULE =
  "a condition is {type: step_count_is, step_count ≥ 1}, {type: has_tool_call, tool_name}, {type: max_tokens_used, max_tokens ≥ 1}, {type: max_cost, max_cost_in_dollars > 0} or {type: finish_reason_is, reason}"

/** What the loop runs with. */
export interface ServerToolPlan {
  readonly tools: ReadonlyArray<DeclaredTool>
  /** Server-tool calls at most (1 to 30). */
  readonly maxToolCalls: number
  readonly stopWhen: ReadonlyArray<StopCondition>
  /** The workspace's `disabled_server_tools` (a tool that runs tools itself, fusion's panel, leaves them out). */
  readonly disabled: ReadonlyArray<string>
}

/** The request lists a server tool (one cheap pass over `tools`, which is usually absent). */
export const declaresServerTools = (request: ResponsesRequest): boolean => {
  const tools = request.tools
  if (tools === undefined) return false
  for (const tool of tools) if (tool.type !== "function" && serverToolTypeOf(tool.type) !== undefined) return true
  return false
}

const refuse = (message: string) => new BadRequest({ message: `Invalid request: ${message}` })

/**
 * The request's server tools and budget, or the 400 naming what cannot run. Only called when
 * `declaresServerTools(request)`. `disabled`: the workspace's `disabled_server_tools`.
 */
export const serverToolPlanOf = (
  request: ResponsesRequest,
  settings: Settings | undefined,
  disabled: ReadonlyArray<string>,
  registry: (type: string) => ServerTool | undefined = serverToolOf,
): Either.Either<ServerToolPlan, BadRequest> => {
  const declared: Array<DeclaredTool> = []
  const tools = request.tools ?? []
  for (let i = 0; i < tools.length; i++) {
    const entry = tools[i] as { readonly type: string; readonly [k: string]: unknown }
    if (entry.type === "function") continue
    const type = serverToolTypeOf(entry.type)
    if (type === undefined) continue
    const at = `tools[${i}]`
    const tool = registry(type)
    if (tool === undefined) return Either.left(refuse(`${at}: server tool ${JSON.stringify(entry.type)} is not available on this gateway`))
    const why = settings === undefined ? undefined : tool.unavailable(settings)
    if (why !== undefined) return Either.left(refuse(`${at}: server tool ${JSON.stringify(entry.type)} cannot run: ${why}`))
    if (disabled.some((name) => namesTool(name, tool))) {
      return Either.left(refuse(`${at}: server tool ${JSON.stringify(entry.type)} is disabled in this workspace (disabled_server_tools)`))
    }
    if (declared.some((d) => d.tool === tool)) return Either.left(refuse(`${at}: server tool ${JSON.stringify(entry.type)} is listed twice`))
    const raw = entry["parameters"]
    if (raw != null && (typeof raw !== "object" || Array.isArray(raw))) return Either.left(refuse(`${at}.parameters: must be an object`))
    // A tool named by an alias (OpenAI's web_search) carries its settings beside `type`; the contract's tools under `parameters`.
    const parameters =
      raw != null ? (raw as Record<string, unknown>) : tool.aliases?.includes(entry.type) === true ? omitType(entry) : {}
    const problem = settings === undefined ? undefined : tool.parametersProblem?.(parameters, settings, disabled)
    if (problem !== undefined) return Either.left(refuse(`${at}.parameters: ${problem}`))
    declared.push({ tool, parameters })
  }
  for (let i = 0; i < tools.length; i++) {
    const entry = tools[i] as { readonly type: string; readonly name?: unknown }
    if (entry.type === "function" && declared.some((d) => d.tool.name === entry.name)) {
      return Either.left(refuse(`tools[${i}].name: ${JSON.stringify(entry.name)} is the name of a server tool this request lists; rename the function`))
    }
  }
  const max = request.max_tool_calls ?? MAX_TOOL_CALLS
  if (max > MAX_TOOL_CALLS) return Either.left(refuse(`max_tool_calls: must be at most ${MAX_TOOL_CALLS} with server tools (got ${max})`))
  if (max < 1) return Either.left(refuse("max_tool_calls: must be at least 1 with server tools"))
  let stopWhen: ReadonlyArray<StopCondition> = []
  if (request.stop_server_tools_when != null) {
    const given = request.stop_server_tools_when
    if (!Array.isArray(given)) return Either.left(refuse("stop_server_tools_when: must be an array of conditions"))
    const conditions: Array<StopCondition> = []
    for (let i = 0; i < given.length; i++) {
      const decoded = decodeStopCondition(given[i])
      if (Either.isLeft(decoded)) return Either.left(refuse(`stop_server_tools_when[${i}]: ${STOP_RULE}`))
      conditions.push(decoded.right)
    }
    stopWhen = conditions
  }
  return Either.right({ tools: declared, maxToolCalls: max, stopWhen, disabled })
}

const omitType = (entry: Readonly<Record<string, unknown>>): Record<string, unknown> => {
  const { type: _type, ...rest } = entry
  return rest
}
