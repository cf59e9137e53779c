/**
 * Declaring server tools: the names a request may use, the registry's verdict
 * (not run here, unavailable, disabled in the workspace: a 400 naming `tools[i]`), and the loop's
 * budget (`max_tool_calls` up to 30, `stop_server_tools_when`).
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { testSettings } from "../../src/config/Config.js"
import type { ResponsesRequest } from "../../src/domain/responses.js"
import { datetimeTool } from "../../src/tools/datetime.js"
import { declaresServerTools, MAX_TOOL_CALLS, type StopCondition, serverToolPlanOf, serverToolTypeOf } from "../../src/tools/declare.js"
import type { ServerTool } from "../../src/tools/types.js"

const settings = testSettings()
const request = (fields: Record<string, unknown>) => ({ model: "m", input: "x", stream: false, store: false, ...fields }) as unknown as ResponsesRequest
const planOf = (fields: Record<string, unknown>, disabled: ReadonlyArray<string> = [], registry?: (type: string) => ServerTool | undefined) =>
  serverToolPlanOf(request(fields), settings, disabled, registry)
const refusal = (e: ReturnType<typeof planOf>): string => {
  if (Either.isRight(e)) throw new Error("expected a refusal")
  expect(e.left.status).toBe(400)
  return e.left.message
}

describe("the names of a server tool", () => {
  test("openrouter:, service: and gateway: name the same tool; OpenAI's web_search and web_search_preview name web search", () => {
    expect(serverToolTypeOf("openrouter:datetime")).toBe("openrouter:datetime")
    expect(serverToolTypeOf("service:datetime")).toBe("openrouter:datetime")
    expect(serverToolTypeOf("gateway:datetime")).toBe("openrouter:datetime")
    expect(serverToolTypeOf("web_search")).toBe("openrouter:web_search")
    expect(serverToolTypeOf("web_search_preview")).toBe("openrouter:web_search")
    expect(serverToolTypeOf("function")).toBeUndefined()
    expect(serverToolTypeOf("file_search")).toBeUndefined()
  })

  test("a request with only function tools (or none) declares none: today's path", () => {
    expect(declaresServerTools(request({}))).toBe(false)
    expect(declaresServerTools(request({ tools: [{ type: "function", name: "f" }] }))).toBe(false)
    expect(declaresServerTools(request({ tools: [{ type: "function", name: "f" }, { type: "openrouter:datetime" }] }))).toBe(true)
  })
})

describe("the registry's verdict", () => {
  test("a tool in the registry is declared with its parameters, beside function tools", () => {
    const plan = planOf({ tools: [{ type: "function", name: "f" }, { type: "service:datetime", parameters: { timezone: "Asia/Tokyo" } }] })
    if (Either.isLeft(plan)) throw plan.left
    expect(plan.right.tools).toEqual([{ tool: datetimeTool, parameters: { timezone: "Asia/Tokyo" } }])
    expect(plan.right.maxToolCalls).toBe(MAX_TOOL_CALLS)
    expect(plan.right.stopWhen).toEqual([])
  })

  test("a tool of the contract this gateway does not run: 400 naming tools[i] and the type", () => {
    expect(refusal(planOf({ tools: [{ type: "function", name: "f" }, { type: "openrouter:code_interpreter" }] }))).toBe(
      'Invalid request: tools[1]: server tool "openrouter:code_interpreter" is not available on this gateway',
    )
  })

  test("an unavailable tool: 400 with its reason", () => {
    const unavailable: ServerTool = { ...datetimeTool, unavailable: () => "web search is not configured on this gateway" }
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }] }, [], () => unavailable))).toContain(
      'tools[0]: server tool "openrouter:datetime" cannot run: web search is not configured on this gateway',
    )
  })

  test("OpenAI's web_search keeps its settings beside type as the tool's parameters", () => {
    // The rule comes with the tool's aliases (web-search.ts lists OpenAI's two types).
    const search: ServerTool = { ...datetimeTool, type: "openrouter:web_search", name: "web_search", aliases: ["web_search", "web_search_preview"] }
    const plan = planOf({ tools: [{ type: "web_search_preview", search_context_size: "low" }] }, [], (t) => (t === "openrouter:web_search" ? search : undefined))
    if (Either.isLeft(plan)) throw plan.left
    expect(plan.right.tools[0]?.parameters).toEqual({ search_context_size: "low" })
  })

  test("disabled in the workspace, by any of its names: 400 naming it", () => {
    for (const name of ["datetime", "openrouter:datetime", "service:datetime"]) {
      expect(refusal(planOf({ tools: [{ type: "gateway:datetime" }] }, [name]))).toContain("tools[0]: server tool \"gateway:datetime\" is disabled in this workspace")
    }
    expect(Either.isRight(planOf({ tools: [{ type: "gateway:datetime" }] }, ["web_search"]))).toBe(true)
  })

  test("the same tool twice, parameters that are not an object, a function of the same name: 400", () => {
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }, { type: "service:datetime" }] }))).toContain("tools[1]")
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime", parameters: "UTC" }] }))).toContain("tools[0].parameters: must be an object")
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }, { type: "function", name: "datetime" }] }))).toContain("tools[1].name")
  })
})

describe("the loop's budget", () => {
  test("max_tool_calls: 1 to 30; 31 is a 400", () => {
    const plan = planOf({ tools: [{ type: "openrouter:datetime" }], max_tool_calls: 4 })
    expect(Either.isRight(plan) && plan.right.maxToolCalls).toBe(4)
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }], max_tool_calls: 31 }))).toContain("max_tool_calls: must be at most 30")
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }], max_tool_calls: 0 }))).toContain("max_tool_calls")
  })

  test("stop_server_tools_when: the five conditions decode; anything else names its index", () => {
    const conditions: ReadonlyArray<StopCondition> = [
      { type: "step_count_is", step_count: 2 },
      { type: "has_tool_call", tool_name: "datetime" },
      { type: "max_tokens_used", max_tokens: 1000 },
      { type: "max_cost", max_cost_in_dollars: 0.5 },
      { type: "finish_reason_is", reason: "stop" },
    ]
    const plan = planOf({ tools: [{ type: "openrouter:datetime" }], stop_server_tools_when: conditions })
    expect(Either.isRight(plan) && plan.right.stopWhen).toEqual(conditions)
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }], stop_server_tools_when: [conditions[0], { type: "max_cost", max_cost_in_dollars: -1 }] }))).toContain(
      "stop_server_tools_when[1]",
    )
    expect(refusal(planOf({ tools: [{ type: "openrouter:datetime" }], stop_server_tools_when: { type: "step_count_is" } }))).toContain(
      "stop_server_tools_when: must be an array",
    )
  })
})
