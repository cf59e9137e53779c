/**
 * The worked plugin of docs/architecture.md ("A plugin, worked through") is real code: the block
 * is written beside the registry (so its relative imports resolve), type-checked with the
 * project's compiler options, imported, registered, and a request runs through a gateway with it.
 * The page's example stops compiling or stops working: this fails.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { FakeProvider, TestGateway } from "gateway/testing"
import { registerPlugin } from "../../src/pipeline/plugins/index.js"
import type { RequestPlugin } from "../../src/pipeline/plugins/plugin.js"
import { typeProblems, writeDocExample } from "../support/doc-example.js"

// Beside the registry, so its relative imports resolve as a plugin's do.
let example: ReturnType<typeof writeDocExample>
let unregister: (() => void) | undefined

beforeAll(() => {
  example = writeDocExample(import.meta.path, "src/pipeline/plugins")
})
afterAll(() => {
  unregister?.()
  example?.remove()
})

describe("the worked plugin of docs/architecture.md", () => {
  test("type-checks with the project's compiler options", () => {
    expect(typeProblems(example.file)).toEqual([])
    // ~20 s of CPU (the program reads Effect's types): the bound leaves room on a loaded machine.
  }, 120_000)

  test("registered, it rewrites the prompt, marks the answer and reports itself; its Schema refuses a bad field", async () => {
    const module = (await import(example.file)) as Record<string, unknown>
    const plugin = Object.values(module).find((v): v is RequestPlugin => typeof v === "object" && v !== null && "schema" in v && "id" in v)
    if (plugin === undefined) throw new Error("the example exports no RequestPlugin")
    expect(plugin.id).toBe("house-style")
    unregister = registerPlugin(plugin)

    await Effect.gen(function* () {
      const fake = yield* FakeProvider
      // The demo catalog's `fake` provider answers demo/free.
      fake.script("fake", FakeProvider.answer("Paris."))
      const gateway = yield* TestGateway.client
      const ask = (plugins: ReadonlyArray<Record<string, unknown>>) =>
        Effect.promise(() =>
          gateway.request("/v1/chat/completions", {
            method: "POST",
            headers: { "x-service-metadata": "enabled" },
            json: { model: "demo/free", messages: [{ role: "user", content: "Capital of France?" }], plugins },
          }),
        )

      const res = yield* ask([{ id: "house-style", marker: "(checked)" }])
      const body = (yield* Effect.promise(() => res.json())) as {
        choices: Array<{ message: { content: string } }>
        service_metadata: { pipeline: Array<{ name: string; summary: string }> }
      }
      expect(res.status).toBe(200)
      expect(body.choices[0]?.message.content).toBe("Paris.\n\n(checked)")
      expect(body.service_metadata.pipeline).toContainEqual(
        expect.objectContaining({ name: "house-style", summary: "the house style was put before the input" }),
      )
      expect(fake.received("fake")[0]?.body.messages).toEqual([
        { role: "system", content: "Answer in plain English." },
        { role: "user", content: "Capital of France?" },
      ])

      const refused = yield* ask([{ id: "house-style", style: "x".repeat(501) }])
      expect(refused.status).toBe(400)
      expect(JSON.stringify(yield* Effect.promise(() => refused.json()))).toContain("plugins[0].style")
      // The refused request never reached the model.
      expect(fake.received("fake")).toHaveLength(1)
    }).pipe(Effect.provide(TestGateway.layer()), Effect.runPromise)
  }, 60_000)
})
