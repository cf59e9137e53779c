/**
 * The worked server tool of docs/architecture.md ("A worked example: a server tool") is run as it is
 * shown: its `ts` block is written beside the other tools in src/tools/ (so its imports resolve),
 * type-checked with the repository's compiler options, registered, and called by a scripted model
 * through the whole gateway. If the example stops compiling or working, this fails.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { FakeProvider, TestGateway } from "gateway/testing"
import { registerServerTool, type ServerToolProgress, type ServerToolType } from "../../src/tools/index.js"
import type { ServerTool } from "../../src/tools/types.js"
import { typeProblems, writeDocExample } from "../support/doc-example.js"

// Beside the other tools, so its imports resolve.
let example: ReturnType<typeof writeDocExample>
let tool: ServerTool | undefined
let unregister: (() => void) | undefined

beforeAll(async () => {
  example = writeDocExample(import.meta.path, "src/tools")
  const module = (await import(example.file)) as Record<string, unknown>
  tool = Object.values(module).find((value): value is ServerTool => typeof value === "object" && value !== null && "run" in value)
  if (tool !== undefined) unregister = registerServerTool(tool)
})
afterAll(() => {
  unregister?.()
  example?.remove()
})

describe("the worked server tool of docs/architecture.md", () => {
  test("compiles under the repository's compiler options", () => {
    expect(typeProblems(example.file)).toEqual([])
  }, 60_000)

  test("exports one ServerTool, openrouter:dice offered as the function dice", () => {
    expect(tool?.type).toBe("openrouter:dice")
    expect(tool?.name).toBe("dice")
  })

  test("a request lists it, the model calls it, the model gets its output and the client its item", () =>
    Effect.gen(function* () {
      const fake = yield* FakeProvider
      // The demo catalog's demo/free is served by the provider `fake`: first it calls the tool, then it answers.
      fake.script("fake", FakeProvider.toolCalls({ name: "dice", arguments: { count: 3, sides: 6 } }), FakeProvider.answer("Three dice rolled."))

      const gateway = yield* TestGateway.client
      const res = yield* Effect.promise(() =>
        gateway.request("/v1/responses", {
          method: "POST",
          json: { model: "demo/free", input: "Roll three dice", tools: [{ type: "openrouter:dice", parameters: { max_dice: 5 } }] },
        }),
      )
      const body = (yield* Effect.promise(() => res.json())) as {
        output: Array<{ type: string; status?: string; rolls?: Array<number>; total?: number; content?: Array<{ text: string }> }>
        usage: { server_tool_use_details: { tool_calls_executed: number } }
      }
      expect(res.status).toBe(200)

      // The client: the tool's item, completed, with three rolls of one die each and their total.
      const item = body.output.find((i) => i.type === "openrouter:dice")
      expect(item?.status).toBe("completed")
      expect(item?.rolls).toHaveLength(3)
      for (const roll of item?.rolls ?? []) expect(roll >= 1 && roll <= 6).toBe(true)
      expect(item?.total).toBe((item?.rolls ?? []).reduce((a, b) => a + b, 0))
      expect(body.usage.server_tool_use_details.tool_calls_executed).toBe(1)
      expect(body.output.at(-1)?.content?.[0]?.text).toBe("Three dice rolled.")

      // The model: offered the function `dice`, then given the tool's output as the call's result.
      const [first, second] = fake.received("fake")
      expect(first?.body.tools?.map((t) => (t as { function: { name: string } }).function.name)).toContain("dice")
      const toolMessage = second?.body.messages.find((m) => (m as { role: string }).role === "tool") as { content: unknown } | undefined
      expect(toolMessage?.content).toBe(JSON.stringify({ rolls: item?.rolls, total: item?.total }))
    }).pipe(Effect.provide(TestGateway.layer()), Effect.runPromise))

  test("its parameters are checked when the request is decoded: max_dice 0 is a 400 naming tools[0].parameters", () =>
    Effect.gen(function* () {
      const gateway = yield* TestGateway.client
      const res = yield* Effect.promise(() =>
        gateway.request("/v1/responses", {
          method: "POST",
          json: { model: "demo/free", input: "Roll", tools: [{ type: "gateway:dice", parameters: { max_dice: 0 } }] },
        }),
      )
      expect(res.status).toBe(400)
      expect(yield* Effect.promise(() => res.text())).toContain("tools[0].parameters: max_dice: must be an integer ≥ 1")
    }).pipe(Effect.provide(TestGateway.layer()), Effect.runPromise))
})

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false

describe("the registry's unions derive from its list", () => {
  test("ServerToolType is the listed tools' types; ServerToolProgress their declared events", () => {
    const types: Same<ServerToolType, "openrouter:datetime" | "openrouter:web_search" | "openrouter:web_fetch" | "openrouter:fusion"> = true
    const events: Same<
      ServerToolProgress["event"],
      "searching" | "panel.added" | "panel.completed" | "panel.failed" | "analysis.in_progress" | "analysis.completed"
    > = true
    expect([types, events]).toEqual([true, true])
  })
})
