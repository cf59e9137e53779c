/**
 * Which generations a destination gets: the workspace's broadcast switch, the key
 * among api_key_hashes, sampling per session, and filter_rules (groups, and/or, fields and
 * operators; regexes checked and compiled once).
 */
import { afterAll, beforeAll, describe, expect } from "bun:test"
import { TEST_BROADCAST } from "../../src/config/Config.js"
import { regexProblem } from "../../src/domain/safe-regex.js"
import { compileFilter, type FilterSubject } from "../../src/broadcast/filters.js"
import { sampled } from "../../src/broadcast/outbox.js"
import { startInProcessGateway, type InProcessGateway, TEST_METRICS_TOKEN } from "../support/gateway.js"
import { ask, rootsBy, setBroadcast, startReceiver, TIMEOUT_MS, test, useDestinations, waitFor } from "./support.js"

let gw: InProcessGateway & { stop: () => Promise<void> }
const receiver = startReceiver()

beforeAll(async () => {
  gw = await startInProcessGateway({ allowPrivateAddresses: true, broadcast: { ...TEST_BROADCAST, pollMs: 50 } })
}, TIMEOUT_MS)
afterAll(async () => {
  await gw.stop()
  receiver.stop()
})
const destination = useDestinations(() => gw, receiver)

const collector = (extra: Record<string, unknown> = {}) =>
  destination({ name: "c", type: "otel-collector", config: { endpoint: receiver.url }, ...extra })

/** The ids the receiver got once the worker has had time to send everything committed. */
const deliveredAfterDrain = async (): Promise<Set<string>> => {
  await gw.server.drain()
  // Every committed row is pending or finished; wait until nothing is pending.
  await waitFor(async () => {
    const list = (await (await gw.fetch("/v1/observability/destinations")).json()) as { data: Array<{ delivery: { pending: number } }> }
    return list.data.every((d) => d.delivery.pending === 0)
  })
  return new Set(rootsBy(receiver.received).keys())
}

describe("the workspace's is_observability_broadcast_enabled", () => {
  test("off: nothing is enqueued; on: generations go", async () => {
    await setBroadcast(gw, false)
    await collector()
    const off = await ask(gw, { input: "paused" })
    expect((await deliveredAfterDrain()).has(off)).toBe(false)
    await setBroadcast(gw, true)
    const on = await ask(gw, { input: "resumed" })
    await waitFor(() => rootsBy(receiver.received).has(on))
    expect(rootsBy(receiver.received).has(off)).toBe(false)
  })
})

describe("enabled and api_key_hashes", () => {
  test("a disabled destination gets nothing", async () => {
    await setBroadcast(gw, true)
    await collector({ enabled: false })
    const id = await ask(gw, { input: "nobody listens" })
    expect((await deliveredAfterDrain()).has(id)).toBe(false)
  })

  test("only the listed keys' generations go", async () => {
    await setBroadcast(gw, true)
    const made1 = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "listed" } })).json()) as { key: string; data: { hash: string } }
    const made2 = (await (await gw.fetch("/v1/keys", { method: "POST", json: { name: "unlisted" } })).json()) as { key: string }
    await collector({ api_key_hashes: [made1.data.hash] })
    const listed = await ask(gw, { input: "listed key" }, made1.key)
    const unlisted = await ask(gw, { input: "other key" }, made2.key)
    const got = await deliveredAfterDrain()
    expect(got.has(listed)).toBe(true)
    expect(got.has(unlisted)).toBe(false)
  })
})

describe("sampling_rate", () => {
  test("a session is wholly in or out; about the rate of sessions go", async () => {
    await setBroadcast(gw, true)
    await collector({ sampling_rate: 0.5 })
    // A batch whose commit began before the destination existed does not see it: start after one.
    await ask(gw, { input: "warm-up" })
    await gw.server.drain()
    const sessions = Array.from({ length: 24 }, (_, i) => `session-${i}`)
    const bySession = new Map<string, Array<string>>()
    for (const s of sessions) bySession.set(s, [await ask(gw, { input: "a", session_id: s }), await ask(gw, { input: "b", session_id: s })])
    const got = await deliveredAfterDrain()
    let inCount = 0
    for (const [, ids] of bySession) {
      const [a, b] = ids as [string, string]
      expect(got.has(a)).toBe(got.has(b))
      if (got.has(a)) inCount++
    }
    // Binomial(24, 0.5) outside [3, 21]: probability < 1e-4.
    expect(inCount).toBeGreaterThan(2)
    expect(inCount).toBeLessThan(22)
  })

  test("the decision is deterministic per destination and session", () => {
    for (let i = 0; i < 50; i++) {
      const s = `s${i}`
      expect(sampled("d1", 0.3, s, `g${i}`)).toBe(sampled("d1", 0.3, s, `other-${i}`))
    }
    // Sessions that differ only in their last character spread too.
    const taken = Array.from({ length: 200 }, (_, i) => sampled("dest-1", 0.5, `session-${i}`, "g")).filter(Boolean).length
    expect(taken).toBeGreaterThan(70)
    expect(taken).toBeLessThan(130)
    expect(sampled("d1", 0, "s", "g")).toBe(false)
    expect(sampled("d1", 1, "s", "g")).toBe(true)
  })
})

describe("filter_rules", () => {
  test("rules are applied by the worker: only matching generations go", async () => {
    await setBroadcast(gw, true)
    await collector({
      filter_rules: {
        enabled: true,
        groups: [
          { logic: "and", rules: [{ field: "input", operator: "contains", value: "urgent" }, { field: "model", operator: "equals", value: "demo/free" }] },
          { logic: "or", rules: [{ field: "session_id", operator: "regex", value: "^vip-[0-9]+$" }] },
        ],
      },
    })
    const urgent = await ask(gw, { input: "urgent: help" })
    const vip = await ask(gw, { input: "hello", session_id: "vip-7" })
    const plain = await ask(gw, { input: "hello", session_id: "guest" })
    const got = await deliveredAfterDrain()
    expect(got.has(urgent)).toBe(true)
    expect(got.has(vip)).toBe(true)
    expect(got.has(plain)).toBe(false)
    const metrics = await (await gw.fetch("/metrics", { key: TEST_METRICS_TOKEN })).text()
    expect(metrics).toMatch(/gateway_broadcast_deliveries_total\{type="otel-collector",outcome="filtered"\} [1-9]/)
  })

  test("a regex with nested quantifiers is refused with 400 naming the field", async () => {
    const res = await gw.fetch("/v1/observability/destinations", {
      method: "POST",
      json: {
        name: "bad",
        type: "otel-collector",
        config: { endpoint: receiver.url },
        filter_rules: { enabled: true, groups: [{ logic: "and", rules: [{ field: "input", operator: "regex", value: "(a+)+$" }] }] },
      },
    })
    expect(res.status).toBe(400)
    const message = ((await res.json()) as { error: { message: string } }).error.message
    expect(message).toContain("filter_rules")
    expect(message).toContain("nests quantifiers")
  })
})

describe("filter evaluation", () => {
  const subject: FilterSubject = {
    model: "openai/gpt-x",
    provider: "openai",
    session_id: null,
    user_id: "u-1",
    api_key_name: "prod",
    finish_reason: "stop",
    input: "What is the weather?",
    output: "Sunny",
    total_cost: 0.02,
    total_tokens: 120,
    prompt_tokens: 100,
    completion_tokens: 20,
  }
  const one = (field: string, operator: string, value?: unknown) =>
    compileFilter({ enabled: true, groups: [{ logic: "and", rules: [{ field, operator, value } as never] }] })(subject)

  test("each operator", () => {
    expect(one("model", "equals", "openai/gpt-x")).toBe(true)
    expect(one("model", "not_equals", "openai/gpt-x")).toBe(false)
    expect(one("input", "contains", "weather")).toBe(true)
    expect(one("input", "not_contains", "weather")).toBe(false)
    expect(one("model", "starts_with", "openai/")).toBe(true)
    expect(one("output", "ends_with", "ny")).toBe(true)
    expect(one("api_key_name", "regex", "^pr.d$")).toBe(true)
    expect(one("total_cost", "gt", 0.01)).toBe(true)
    expect(one("total_tokens", "lt", 100)).toBe(false)
    expect(one("prompt_tokens", "gte", 100)).toBe(true)
    expect(one("completion_tokens", "lte", 19)).toBe(false)
    expect(one("session_id", "exists")).toBe(false)
    expect(one("session_id", "not_exists")).toBe(true)
    expect(one("user_id", "exists")).toBe(true)
  })

  test("disabled rules, or no groups, match everything; groups are OR'ed", () => {
    expect(compileFilter(null)(subject)).toBe(true)
    expect(compileFilter({ enabled: false, groups: [{ logic: "and", rules: [{ field: "model", operator: "equals", value: "x" }] }] })(subject)).toBe(true)
    expect(compileFilter({ enabled: true, groups: [] })(subject)).toBe(true)
    const twoGroups = compileFilter({
      enabled: true,
      groups: [
        { logic: "and", rules: [{ field: "model", operator: "equals", value: "x" }] },
        { logic: "or", rules: [{ field: "model", operator: "equals", value: "y" }, { field: "provider", operator: "equals", value: "openai" }] },
      ],
    })
    expect(twoGroups(subject)).toBe(true)
  })

  test("regex checks: length cap, nested quantifiers, backreferences", () => {
    expect(regexProblem("^vip-[0-9]+$")).toBeUndefined()
    expect(regexProblem("(ab)+c")).toBeUndefined()
    expect(regexProblem("(a+)+")).toContain("nests quantifiers")
    expect(regexProblem("(\\w*)*x")).toContain("nests quantifiers")
    expect(regexProblem("((a|b+))+")).toContain("nests quantifiers")
    expect(regexProblem("(a)\\1")).toContain("backreference")
    expect(regexProblem("a".repeat(300))).toContain("longer than")
    expect(regexProblem("(")).toContain("not a valid regular expression")
  })
})
