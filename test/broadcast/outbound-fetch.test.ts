/**
 * The safe outbound fetcher (src/outbound/fetch.ts): private, loopback, link-local and metadata
 * addresses refused unless allowed; redirects checked hop by hop; a deadline; a response-size cap.
 */
import { describe, expect, test } from "bun:test"
import { isPrivateAddress, safeFetch } from "../../src/outbound/fetch.js"
import { failure, useLocalServers } from "../support/outbound.js"

const local = useLocalServers()
const serve = (fetch: (req: Request) => Response | Promise<Response>) => `http://127.0.0.1:${local(fetch).port}`

const allow = { allowPrivateAddresses: true, timeoutMs: 2_000, maxResponseBytes: 1024 }
const deny = { ...allow, allowPrivateAddresses: false }

describe("address classes", () => {
  test("private, loopback, link-local, CGNAT, metadata and mapped addresses are not public", () => {
    for (const a of [
      "127.0.0.1",
      "10.1.2.3",
      "172.16.0.9",
      "192.168.1.1",
      "169.254.169.254",
      "100.64.0.1",
      "0.0.0.0",
      "::1",
      "::",
      "fe80::1",
      "fd00:ec2::254",
      "::ffff:127.0.0.1",
      "::ffff:7f00:1",
      "224.0.0.1",
    ]) {
      expect([a, isPrivateAddress(a)]).toEqual([a, true])
    }
  })

  test("public addresses pass", () => {
    for (const a of ["8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "::ffff:8.8.8.8"]) expect([a, isPrivateAddress(a)]).toEqual([a, false])
  })
})

describe("safeFetch", () => {
  test("a loopback URL is refused unless private addresses are allowed", async () => {
    const url = serve(() => new Response("ok"))
    const refused = await failure(safeFetch(url, { method: "GET" }, deny))
    expect(refused.kind).toBe("refused")
    expect(refused.message).toContain("outbound.allow_private_addresses")
    expect((await safeFetch(url, { method: "GET" }, allow)).status).toBe(200)
  })

  test("a name that resolves to loopback is refused too", async () => {
    const url = serve(() => new Response("ok"))
    const refused = await failure(safeFetch(url.replace("127.0.0.1", "localhost"), { method: "GET" }, deny))
    expect(refused.kind).toBe("refused")
  })

  test("redirects are followed with each hop checked", async () => {
    const target = serve(() => new Response("landed"))
    const hop = serve(() => new Response(null, { status: 302, headers: { location: `${target}/x` } }))
    const res = await safeFetch(hop, { method: "GET" }, allow)
    expect(new TextDecoder().decode(res.body)).toBe("landed")
  })

  test("a redirect loop ends after five hops", async () => {
    let self = ""
    self = serve(() => new Response(null, { status: 307, headers: { location: self } }))
    const e = await failure(safeFetch(self, { method: "GET" }, allow))
    expect(e.message).toContain("more than 5 redirects")
  })

  test("the answer is read up to the cap", async () => {
    const url = serve(() => new Response("x".repeat(10_000)))
    const res = await safeFetch(url, { method: "GET" }, allow)
    expect(res.body.length).toBe(1024)
  })

  test("no answer within the deadline is a timeout", async () => {
    const url = serve(async () => {
      await Bun.sleep(1_000)
      return new Response("late")
    })
    const e = await failure(safeFetch(url, { method: "GET" }, { ...allow, timeoutMs: 100 }))
    expect(e.kind).toBe("timeout")
  })

  test("only http and https", async () => {
    expect((await failure(safeFetch("file:///etc/passwd", { method: "GET" }, allow))).kind).toBe("invalid")
  })
})
