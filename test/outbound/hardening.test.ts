/**
 * The safe outbound fetcher's hardening: the connection goes to the address that was
 * checked (no DNS rebinding), the address forms that hide a private host, redirects to loopback,
 * the User-Agent, no proxy, the all-or-nothing size cap and the process-wide concurrency limit.
 */
import { afterAll, describe, expect, test } from "bun:test"
import {
  isPrivateAddress,
  OUTBOUND_USER_AGENT,
  outboundLoad,
  safeFetch,
  setOutboundConcurrency,
  DEFAULT_MAX_CONCURRENT_OUTBOUND,
} from "../../src/outbound/fetch.js"
import { failure, useLocalServers } from "../support/outbound.js"

afterAll(() => {
  setOutboundConcurrency(DEFAULT_MAX_CONCURRENT_OUTBOUND)
})

const local = useLocalServers()
const serve = (fetch: (req: Request) => Response | Promise<Response>) => local(fetch).port

const allow = { allowPrivateAddresses: true, timeoutMs: 2_000, maxResponseBytes: 4096 }
const deny = { ...allow, allowPrivateAddresses: false }

describe("addresses refused by default", () => {
  test("10.x, 169.254.169.254, 100.100.100.200, fd00:ec2::254, mapped and 0.0.0.0 are private", () => {
    for (const a of ["10.0.0.1", "169.254.169.254", "100.100.100.200", "fd00:ec2::254", "::ffff:10.0.0.1", "::ffff:a9fe:a9fe", "0.0.0.0"]) {
      expect([a, isPrivateAddress(a)]).toEqual([a, true])
    }
  })

  test("IPv6 forms that embed a private IPv4 address are private like the address they embed", () => {
    const embedding = [
      "::127.0.0.1", // IPv4-compatible
      "::7f00:1",
      "::a9fe:a9fe", // compatible, the metadata address in hex
      "::ffff:0:10.0.0.1", // IPv4-translated
      "::ffff:0:a9fe:a9fe",
      "2002:7f00:1::", // 6to4 of 127.0.0.1
      "2002:a9fe:a9fe::1", // 6to4 of 169.254.169.254
      "2001:0:4136:e378:8000:63bf:80ff:fffe", // Teredo, client 127.0.0.1 (inverted)
      "2001:0:a00:1::1", // Teredo through a server at 10.0.0.1
      "fec0::1", // site-local
      "feff::1",
    ]
    for (const a of embedding) expect([a, isPrivateAddress(a)]).toEqual([a, true])
  })

  test("IPv6 forms that embed a public IPv4 address, and public IPv6 addresses, pass", () => {
    for (const a of ["2002:808:808::1", "::ffff:0:8.8.8.8", "2001:0:4136:e378:8000:63bf:f7f7:f7f7", "2606:4700::1111", "2001:4860:4860::8888"]) {
      expect([a, isPrivateAddress(a)]).toEqual([a, false])
    }
  })

  test("a URL with an IPv4-compatible or 6to4 form of loopback is refused before any connection", async () => {
    for (const url of ["http://[::127.0.0.1]:9/", "http://[::ffff:0:127.0.0.1]:9/", "http://[2002:7f00:1::]:9/", "http://[fec0::1]:9/"]) {
      const e = await failure(safeFetch(url, { method: "GET" }, deny))
      expect([url, e.kind]).toEqual([url, "refused"])
    }
  })

  test("127.0.0.1, 10.x and the metadata address are refused before any connection", async () => {
    for (const url of ["http://127.0.0.1:9/", "http://10.1.2.3/", "http://169.254.169.254/latest/meta-data/", "http://[::1]:9/"]) {
      const e = await failure(safeFetch(url, { method: "GET" }, deny))
      expect([url, e.kind]).toEqual([url, "refused"])
    }
  })

  test("decimal, octal, hex and short IPv4 forms of loopback and metadata are refused", async () => {
    for (const url of ["http://2130706433/", "http://0177.0.0.1/", "http://0x7f.0.0.1/", "http://127.1/", "http://2852039166/", "http://[::ffff:127.0.0.1]/"]) {
      const e = await failure(safeFetch(url, { method: "GET" }, deny))
      expect([url, e.kind]).toEqual([url, "refused"])
    }
  })

  test("a name resolving to loopback is refused", async () => {
    const port = serve(() => new Response("secret"))
    const e = await failure(safeFetch(`http://inside.test:${port}/`, { method: "GET" }, { ...deny, resolve: async () => ["127.0.0.1"] }))
    expect(e.kind).toBe("refused")
    expect(e.message).toContain("127.0.0.1")
  })

  test("a redirect to loopback is refused at the hop", async () => {
    // The first hop is a public address; the network is replaced so no real connection is made.
    const real = globalThis.fetch
    const calls: Array<string> = []
    globalThis.fetch = (async (input: string | URL | Request) => {
      calls.push(String(input))
      return new Response(null, { status: 302, headers: { location: "http://127.0.0.1:9/secret" } })
    }) as typeof fetch
    try {
      const e = await failure(safeFetch("http://public.test/", { method: "GET" }, { ...deny, resolve: async () => ["8.8.8.8"] }))
      expect(e.kind).toBe("refused")
      expect(calls).toEqual(["http://8.8.8.8/"])
    } finally {
      globalThis.fetch = real
    }
  })
})

describe("the connection goes to the checked address", () => {
  test("the name is resolved once and the request is sent to that address with the name as Host", async () => {
    let seen: { host: string | null; ua: string | null } | undefined
    const port = serve((req) => {
      seen = { host: req.headers.get("host"), ua: req.headers.get("user-agent") }
      return new Response("pinned")
    })
    let lookups = 0
    const resolve = async () => {
      lookups++
      // A rebinding resolver would answer differently the second time: it is never asked again.
      return lookups === 1 ? ["127.0.0.1"] : ["10.0.0.1"]
    }
    const res = await safeFetch(`http://rebind.test:${port}/x`, { method: "GET" }, { ...allow, resolve })
    expect(new TextDecoder().decode(res.body)).toBe("pinned")
    expect(lookups).toBe(1)
    expect(seen).toEqual({ host: `rebind.test:${port}`, ua: OUTBOUND_USER_AGENT })
  })

  test("HTTP_PROXY is not used", async () => {
    const port = serve(() => new Response("direct"))
    const before = process.env.HTTP_PROXY
    process.env.HTTP_PROXY = "http://127.0.0.1:9"
    try {
      const res = await safeFetch(`http://127.0.0.1:${port}/`, { method: "GET" }, allow)
      expect(new TextDecoder().decode(res.body)).toBe("direct")
    } finally {
      if (before === undefined) delete process.env.HTTP_PROXY
      else process.env.HTTP_PROXY = before
    }
  })
})

describe("caps", () => {
  test("failOverCap: an answer over the cap is an error, not a truncated body", async () => {
    const port = serve(() => new Response("x".repeat(10_000)))
    const e = await failure(safeFetch(`http://127.0.0.1:${port}/`, { method: "GET" }, { ...allow, failOverCap: true }))
    expect(e.kind).toBe("too_large")
  })

  test("at most max_concurrent fetches run at once; the rest wait", async () => {
    setOutboundConcurrency(2)
    let active = 0
    let peak = 0
    const port = serve(async () => {
      active++
      peak = Math.max(peak, active)
      await Bun.sleep(50)
      active--
      return new Response("ok")
    })
    const all = Array.from({ length: 6 }, () => safeFetch(`http://127.0.0.1:${port}/`, { method: "GET" }, allow))
    await Bun.sleep(10)
    expect(outboundLoad().running).toBe(2)
    await Promise.all(all)
    expect(peak).toBe(2)
    expect(outboundLoad()).toEqual({ running: 0, waiting: 0 })
    setOutboundConcurrency(DEFAULT_MAX_CONCURRENT_OUTBOUND)
  })
})
