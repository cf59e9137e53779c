/**
 * Regression (found in review): a valid JSON body whose function tool `parameters` is nested 50 000 levels deep (300 KB,
 * well under the body cap). JSON.parse accepts it and the Schema (Record of Unknown) does not
 * look inside, but every later JSON.stringify of the echoed tools overflows the stack:
 *  - non-streaming: route.ts `JSON.stringify(assembler.result())` throws -> Bun's `error` handler -> 500
 *    for a caller mistake (clients retry 5xx);
 *  - streaming: `assembler.start()` throws inside ReadableStream.start -> the stream errors, the
 *    client gets a 200 with no terminal event, and `end()`/`finalize` never run: the reservation
 *    is held until the next restart (and the deadline timer stays armed).
 */
import { describe, expect, test } from "bun:test"
import { Effect } from "effect"
import { Spend } from "../../src/services/Spend.js"
import { endpointOf, modelOf } from "../support/catalog.js"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const DEPTH = 50_000
const deep = `${'{"a":'.repeat(DEPTH)}1${"}".repeat(DEPTH)}`
const bodyText = (stream: boolean) =>
  `{"model":"demo/echo","input":"hi","stream":${stream},"provider":{"order":["fake"]},` +
  `"tools":[{"type":"function","name":"f","parameters":${deep}}]}`

const openReservations = () => gw().server.runtime.runPromise(Effect.flatMap(Spend, (s) => s.openReservations))

const keyWithLimit = async () =>
  ((await (await gw().fetch("/v1/keys", { method: "POST", json: { name: `deep-${Math.random()}`, limit: 5 } })).json()) as {
    key: string
  }).key

describe("deeply nested but valid JSON", () => {
  test("non-streaming: a caller's body must not produce a 5xx", async () => {
    const key = await keyWithLimit()
    const res = await gw().fetch("/v1/responses", {
      method: "POST",
      key,
      headers: { "content-type": "application/json" },
      body: bodyText(false),
    })
    await res.text()
    expect(res.status).toBeLessThan(500)
  })

  test("streaming: the client gets a terminal event and the reservation is released", async () => {
    const key = await keyWithLimit()
    const before = await openReservations()
    let status = 0
    let text = ""
    try {
      const res = await gw().fetch("/v1/responses", {
        method: "POST",
        key,
        headers: { "content-type": "application/json" },
        body: bodyText(true),
      })
      status = res.status
      text = await res.text()
    } catch (e) {
      text = `client error: ${String(e)}`
    }
    await Bun.sleep(200)
    await gw().server.drain()
    const after = await openReservations()
    expect({ openReservationsLeaked: after - before }).toEqual({ openReservationsLeaked: 0 })
    expect(text.includes("[DONE]") || status >= 400).toBe(true)
  })
})

describe("the nesting limit (128 levels, counted from the body)", () => {
  /** A tool whose parameters nest `levels` deep, objects and arrays in turn (body, tools, tool: 3 levels above). */
  const withParameters = (levels: number) => {
    let open = ""
    let close = ""
    for (let i = 0; i < levels; i++) {
      open += i % 2 === 0 ? '{"a":' : "["
      close = (i % 2 === 0 ? "}" : "]") + close
    }
    return `{"model":"demo/echo","input":"hi","provider":{"order":["fake"]},"tools":[{"type":"function","name":"f","parameters":${open}1${close}}]}`
  }
  const post = (body: string) => gw().fetch("/v1/responses", { method: "POST", headers: { "content-type": "application/json" }, body })

  test("128 levels pass; 129 are a 400 that names the rule", async () => {
    const atLimit = await post(withParameters(125))
    expect(atLimit.status).toBe(200)
    await atLimit.text()
    const over = await post(withParameters(126))
    expect(over.status).toBe(400)
    expect(((await over.json()) as { error: { message: string } }).error.message).toContain("nests deeper than 128 levels")
  })
})

describe("deeply nested but valid JSON, HTTP upstream", () => {
  test("is a 4xx, not a 502 that also puts healthy endpoints into cooldown for everyone", async () => {
    const { startMockUpstream } = await import("../../scripts/mock-upstream.js")
    const { startInProcessGateway } = await import("../support/gateway.js")
    const { Router } = await import("../../src/routing/Router.js")
    const mock = await startMockUpstream({ tokens: 3 })
    const g = await startInProcessGateway({
      catalog: {
        providers: [
          { id: "up-a", kind: "openai-chat", base_url: mock.url },
          { id: "up-b", kind: "openai-chat", base_url: mock.url },
        ],
        models: [modelOf("http/m", endpointOf("up-a", { upstream_model: "m" }), endpointOf("up-b", { upstream_model: "m" }))],
      },
    })
    const statuses: Array<number> = []
    let cooling: Array<string> = []
    try {
      for (let i = 0; i < 3; i++) {
        const res = await g.fetch("/v1/responses", {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: `{"model":"http/m","input":"hi","tools":[{"type":"function","name":"f","parameters":${deep}}]}`,
        })
        await res.text()
        statuses.push(res.status)
      }
      const router = await g.server.runtime.runPromise(Router)
      cooling = ["up-a/m", "up-b/m"].filter((id) => router.health.isCoolingDown(id, Date.now()))
    } finally {
      await g.stop()
      await mock.stop()
    }
    expect({ statuses, coolingDown: cooling }).toEqual({ statuses: [400, 400, 400], coolingDown: [] })
  })
})
