/**
 * Unfinished request bodies from clients holding a valid key are capped per key
 * (`server.max_unfinished_bodies_per_key`) and per client address
 * (`server.max_unfinished_bodies_per_ip`): the excess is answered at once (429, Retry-After, the
 * connection closed) instead of being held until the body deadline, and requests without a body
 * from the same address are still served. Partial bodies are sent over raw sockets.
 *
 * Waits are bounds, not timings: without the caps a body over them is held for the whole body
 * deadline (20 s here) and never answered within the bound.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { demoCatalog } from "../../src/config/Config.js"
import { useGateway } from "../support/gateway.js"
import { headerOf, postHead, type RawConnection, rawConnect, statusOf } from "../support/raw.js"

const PER_KEY = 3
const PER_ADDRESS = 5
/** Long enough for any bound below on a loaded machine. */
const BOUND_MS = 8_000

const gw = useGateway({
  bodyTimeoutMs: 20_000,
  catalog: { ...demoCatalog, server: { max_unfinished_bodies_per_key: PER_KEY, max_unfinished_bodies_per_ip: PER_ADDRESS } },
})

const open: Array<RawConnection> = []
afterAll(() => {
  for (const c of open) c.destroy()
})

const newKey = async (name: string) => {
  const res = await gw().fetch("/v1/keys", { method: "POST", json: { name } })
  return ((await res.json()) as { key: string }).key
}

/** A request with `key` that declares 1,000 bytes of body and sends 5: unfinished until the deadline. */
const partial = async (key: string, path = "/v1/responses") => {
  const c = await rawConnect(gw().server.port)
  c.write(`${postHead(path, 1000, { authorization: `Bearer ${key}` })}{"mod`)
  open.push(c)
  return c
}

const ask = (key: string) => gw().fetch("/v1/responses", { method: "POST", key, json: { model: "demo/echo", input: "hello" } })

/** Asks with `key` until the answer is `status` (the partial bodies sent before are counted by then), or the bound passes. */
const askUntil = async (key: string, status: number): Promise<Response> => {
  const until = Date.now() + BOUND_MS
  for (;;) {
    const res = await ask(key)
    if (res.status === status || Date.now() > until) return res
    await res.text()
    await Bun.sleep(50)
  }
}

describe("unfinished bodies are capped per key and per address", () => {
  test("a key at its cap is answered 429 at once, naming the setting; another key and bodiless requests are served", async () => {
    const a = await newKey("partial-a")
    const b = await newKey("partial-b")
    const held = await Promise.all(Array.from({ length: PER_KEY }, () => partial(a)))
    const refused = await askUntil(a, 429)
    expect(refused.status).toBe(429)
    expect(refused.headers.get("retry-after")).toBe("1")
    expect(refused.headers.get("connection")).toBe("close")
    const body = (await refused.json()) as { error: { code: number; message: string } }
    expect(body.error.code).toBe(429)
    expect(body.error.message).toContain(`This key has ${PER_KEY} request bodies still arriving`)
    expect(body.error.message).toContain("server.max_unfinished_bodies_per_key")
    // Another key from the same address, and a request without a body, are not held up.
    expect((await ask(b)).status).toBe(200)
    expect((await gw().fetch("/v1/models", { key: b })).status).toBe(200)
    // The held bodies are still waiting (nothing answered them).
    for (const c of held) expect(c.closed()).toBe(false)

    // The address's cap: two more unfinished bodies with b make five from this address.
    const more = await Promise.all([partial(b), partial(b)])
    const c = await newKey("partial-c")
    const overAddress = await askUntil(c, 429)
    expect(overAddress.status).toBe(429)
    expect(((await overAddress.json()) as { error: { message: string } }).error.message).toContain(
      `Your address has ${PER_ADDRESS} request bodies still arriving, its maximum (server.max_unfinished_bodies_per_ip)`,
    )
    // The control plane counts the same bodies: a management request with a body is refused too.
    const control = await rawConnect(gw().server.port)
    open.push(control)
    control.write(`${postHead("/v1/keys", 15, { authorization: `Bearer ${gw().adminKey}` })}{"name":"late"}`)
    expect(await control.waitClosed(BOUND_MS)).toBe(true)
    expect(statusOf(control.text())).toBe(429)
    expect(headerOf(control.text(), "connection")).toBe("close")

    // Clients that leave give their places back.
    for (const h of [...held, ...more]) h.destroy()
    expect((await askUntil(a, 200)).status).toBe(200)
    expect((await askUntil(c, 200)).status).toBe(200)
  }, 60_000)

  test("the caps are settings of the config file: positive integers accepted, 0 refused naming the setting", async () => {
    const { parseConfigFile } = await import("../../src/config/Config.js")
    const file = (server: Record<string, unknown>) => parseConfigFile("gateway.json", JSON.stringify({ ...demoCatalog, server }))
    expect(file({ max_unfinished_bodies_per_key: 10, max_unfinished_bodies_per_ip: 20 })._tag).toBe("Right")
    const bad = file({ max_unfinished_bodies_per_ip: 0 })
    expect(bad._tag).toBe("Left")
    expect(JSON.stringify(bad)).toContain("max_unfinished_bodies_per_ip")
    expect(JSON.stringify(bad)).toContain("must be a positive integer")
  })
})
