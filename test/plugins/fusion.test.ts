/**
 * The `fusion` plugin on the three client formats, against the mock upstream: the
 * panel and the judge run before the model, their answers and the analysis reach the request's
 * model as a system message above the last user message, the record's router is fusion, each
 * inner call is recorded under the request's generation id; `enabled: false`; presets; every
 * panelist failing is a 502; a failed judge leaves the answers without an analysis.
 *
 * The plugin is built over inner calls (pluginSetOf), as the route builds it: the stages run
 * through the preparer of the route with the real services, then the model turn through the turn runner.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { Context, Exit } from "effect"
import { startMockUpstream } from "../../scripts/mock-upstream.js"
import { chatFormat } from "../../src/formats/chat/index.js"
import { messagesFormat } from "../../src/formats/messages/index.js"
import { responsesFormat } from "../../src/formats/responses/index.js"
import type { ApiError } from "../../src/domain/errors.js"
import type { ClientFormat } from "../../src/formats/format.js"
import { pluginSetOf } from "../../src/pipeline/plugins/index.js"
import type { Prepared } from "../../src/pipeline/pre-model.js"
import { makeTurnRunner } from "../../src/pipeline/turns.js"
import { PlainAbort } from "../../src/providers/abort.js"
import { Router } from "../../src/routing/Router.js"
import { TAG } from "../routing/helpers.js"
import { preparerOf } from "../../src/testing/stores.js"
import { useServices } from "../support/services.js"
import { ANALYSIS, fusionCatalog, PRESETS, servicesOf } from "../tools/support.js"
import { bodyIn, type Format } from "../support/formats.js"

const mock = await startMockUpstream({ tokens: 1 })
afterAll(() => mock.stop())
const services = useServices({ catalog: fusionCatalog(mock, PRESETS) })

const FORMATS: ReadonlyArray<readonly [Format, ClientFormat]> = [
  ["responses", responsesFormat],
  ["chat", chatFormat],
  ["messages", messagesFormat],
]

const QUESTION = "What is the capital of France?"

const bodyOf = (format: Format, plugin: Record<string, unknown>) => {
  const pluginsField = { plugins: [{ id: "fusion", ...plugin }] }
  const history = [
    { role: "user", content: "Hello" },
    { role: "assistant", content: "Hi! Ask me anything." },
    { role: "user", content: QUESTION },
  ]
  return bodyIn(format, "test/final", history, pluginsField)
}

type Outcome = Prepared | { readonly refused: string; readonly status: number; readonly message: string; readonly metadata?: unknown }

const prepare = async (format: ClientFormat, body: unknown): Promise<Outcome> => {
  const runtime = services()
  const e = await servicesOf(runtime)
  const preparer = await preparerOf(
    runtime,
    e.settings,
    pluginSetOf({ innerCalls: e.innerCalls, settings: e.settings }),
  )
  const { secret } = await e.newKey()
  const p = preparer.prepare(new Headers({ authorization: `Bearer ${secret}` }), JSON.stringify(body), undefined, format)
  if (p.ready !== undefined) return p.ready
  if (p.refused !== undefined) return { refused: p.refused._tag, status: p.refused.status, message: p.refused.message }
  const exit = await runtime.runPromiseExit(p.pending())
  if (Exit.isSuccess(exit)) return exit.value
  if (exit.cause._tag === "Fail") {
    const error = exit.cause.error as ApiError
    return { refused: error._tag, status: error.status, message: error.message, metadata: (error as { metadata?: unknown }).metadata }
  }
  throw new Error("defect")
}

const ready = (o: Outcome): Prepared => {
  if ("refused" in o) throw new Error(`refused: ${o.message}`)
  return o
}

/** The model turn of a prepared request, as the route runs it; resolves with what the mock was sent. */
const modelTurn = async (p: Prepared) => {
  const runtime = services()
  const rt = await runtime.runtime()
  const turns = makeTurnRunner({ router: Context.get(rt.context, Router), upstreamLimits: { bodyBytes: 1 << 24, eventBytes: 1 << 20 }, deadlineMessage: "deadline" })
  const from = mock.requests.length
  const turn = await turns.runTurn(p.request, p.plan, { streaming: false, upstreamAbort: new PlainAbort(), trace: undefined, startedAt: Date.now(), attempts: [] })
  if (turn.refused !== undefined) throw new Error(turn.refused.message)
  for await (const _ of turn.call.events) {
    // Read to the end.
  }
  return mock.requests.slice(from)
}

interface FusionEntry {
  readonly type: string
  readonly summary: string
  readonly data: Record<string, unknown>
}

const fusionEntry = (p: Prepared): FusionEntry => {
  const entry = p.pipeline?.find((x) => x.name === "fusion")
  if (entry === undefined) throw new Error("no fusion entry in the pipeline")
  return entry as unknown as FusionEntry
}

const tagsSince = (from: number) => mock.requests.slice(from).map((r) => r.headers[TAG])

describe("the fusion plugin", () => {
  for (const [name, format] of FORMATS) {
    test(`${name}: the panel and the judge run before the model, whose request gets their answers and the analysis as a system message`, async () => {
      const from = mock.requests.length
      const p = ready(await prepare(format, bodyOf(name, { analysis_models: ["test/a", "test/b"], model: "test/judge", tools: [] })))
      expect(tagsSince(from).sort()).toEqual(["pa", "pb", "pjudge"])
      expect(p.router).toBe("fusion")
      expect(p.plan.requested).toBe("test/final")

      // The system message sits right above the last user message; the conversation is kept.
      const input = p.request.input as ReadonlyArray<{ role?: string; content?: unknown }>
      const roles = input.map((i) => i.role)
      expect(roles.slice(-2)).toEqual(["system", "user"])
      expect(roles.filter((r) => r === "user")).toHaveLength(2)
      const system = String(input[input.length - 2]?.content)
      expect(system).toContain("### Answer by test/a\nAnswer A: Paris.")
      expect(system).toContain("### Answer by test/b\nAnswer B: Paris, on the Seine.")
      expect(system).toContain(JSON.stringify(ANALYSIS, null, 2))

      const entry = fusionEntry(p)
      expect(entry.type).toBe("plugin")
      expect(entry.summary).toBe("2 of 2 analysis models answered; test/judge compared them")
      expect(entry.data["analysis"]).toEqual(ANALYSIS)
      expect(entry.data["model"]).toBe("test/judge")

      // Each inner call is recorded under the request's generation id (made before the decision).
      expect(p.generationId).toMatch(/^gen-/)
      const e = await servicesOf(services())
      const generations = entry.data["generations"] as ReadonlyArray<string>
      expect(generations).toHaveLength(3)
      for (const id of generations) {
        const record = await e.generation(id)
        expect(record.parentGenerationId).toBe(p.generationId as string)
        expect(record.keyHash).toBe(p.principal.hash)
        expect(record.totalCost).toBeGreaterThan(0)
      }

      // The request's model writes the final answer from them.
      const sent = await modelTurn(p)
      expect(sent.map((r) => r.headers[TAG])).toEqual(["pfinal"])
      const messages = (sent[0]?.body as { messages?: ReadonlyArray<{ role: string; content: unknown }> } | undefined)?.messages ?? []
      expect(messages.some((m) => m.role === "system" && JSON.stringify(m.content).includes("Answer B: Paris, on the Seine."))).toBe(true)
      expect(JSON.stringify(messages[messages.length - 1]?.content)).toContain(QUESTION)
    })

    test(`${name}: enabled: false runs no panel and leaves the request as it was`, async () => {
      const from = mock.requests.length
      const p = ready(await prepare(format, bodyOf(name, { enabled: false, analysis_models: ["test/a"] })))
      expect(mock.requests.length).toBe(from)
      expect(p.router).toBeNull()
      expect(p.generationId).toBeUndefined()
      expect(JSON.stringify(p.request.input)).not.toContain('"system"')
    })
  }

  test("the panel gets the last user message (the question), not the whole conversation", async () => {
    const from = mock.requests.length
    ready(await prepare(responsesFormat, bodyOf("responses", { analysis_models: ["test/a"], model: "test/judge", tools: [] })))
    const panel = mock.requests.slice(from).find((r) => r.headers[TAG] === "pa")
    expect((panel?.body as { messages?: unknown } | undefined)?.messages).toEqual([{ role: "user", content: QUESTION }])
  })

  test("a preset from config names the panel and the judge", async () => {
    const from = mock.requests.length
    const p = ready(await prepare(responsesFormat, bodyOf("responses", { preset: "general-high", tools: [] })))
    expect(tagsSince(from).sort()).toEqual(["pa", "pb", "pc", "pjudge"])
    const entry = fusionEntry(p)
    expect(entry.data["analysis_models"]).toEqual(["test/a", "test/b", "test/c"])
  })

  test("a preset the config does not have is a 400 naming the field, before any call", async () => {
    const from = mock.requests.length
    const o = await prepare(responsesFormat, bodyOf("responses", { preset: "general-budget" }))
    expect(o).toMatchObject({
      status: 400,
      message: "Invalid request: plugins[0].preset: fusion preset general-budget is not configured on this gateway (plugins.fusion.presets)",
    })
    expect(mock.requests.length).toBe(from)
  })

  test("analysis_models out of 1 to 8 is a 400 naming the field", async () => {
    const o = await prepare(responsesFormat, bodyOf("responses", { analysis_models: [] }))
    expect(o).toMatchObject({ status: 400 })
    expect((o as { message: string }).message).toContain("analysis_models")
  })

  test("one failing panelist is listed and the rest go on", async () => {
    const p = ready(await prepare(chatFormat, bodyOf("chat", { analysis_models: ["test/a", "test/fail"], model: "test/judge", tools: [] })))
    const entry = fusionEntry(p)
    expect(entry.summary).toBe("1 of 2 analysis models answered; test/judge compared them")
    expect(entry.data["failed_models"]).toEqual([expect.objectContaining({ model: "test/fail", status_code: 502 })])
  })

  test("every panelist failing is a 502 with failure_reason and the failed models; the model is not called", async () => {
    const from = mock.requests.length
    const o = await prepare(messagesFormat, bodyOf("messages", { analysis_models: ["test/fail", "test/fail2"], model: "test/judge" }))
    expect(o).toMatchObject({ refused: "BadGateway", status: 502, metadata: { failure_reason: "all_panels_failed" } })
    expect(tagsSince(from).sort()).toEqual(["pfail", "pfail2"])
  })

  test("a judge that does not answer JSON: the answers still reach the model, the entry says why there is no analysis", async () => {
    const p = ready(await prepare(responsesFormat, bodyOf("responses", { analysis_models: ["test/a"], model: "test/judge-prose", tools: [] })))
    const entry = fusionEntry(p)
    expect(entry.data["failure_reason"]).toBe("judge_not_valid_json")
    expect(entry.summary).toBe("1 of 1 analysis models answered; no analysis (judge_not_valid_json)")
    expect(JSON.stringify(p.request.input)).toContain("Answer A: Paris.")
  })

  test("the judge defaults to the request's own model", async () => {
    const from = mock.requests.length
    ready(await prepare(responsesFormat, bodyOf("responses", { analysis_models: ["test/a"], tools: [] })))
    // test/final answers prose as the judge: two calls, the panelist and the judge at the request's model.
    expect(tagsSince(from)).toEqual(["pa", "pfinal"])
  })
})
