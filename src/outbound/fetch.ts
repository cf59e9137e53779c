/**
 * The safe outbound fetcher: every request the gateway makes to a URL a tenant gave (broadcast
 * destinations; later plugins) goes through it. The host is resolved and every address checked:
 * private, loopback, link-local, CGNAT, multicast, reserved and cloud-metadata addresses are
 * refused unless the operator allows them (`outbound.allow_private_addresses`, for collectors
 * inside the network). Redirects are not followed blindly: each hop is checked again (at most
 * MAX_REDIRECTS). A deadline covers the whole exchange, and at most `maxResponseBytes` of the
 * answer are read. Limit: the check and the connection resolve the name separately, so a name
 * whose records change in between (DNS rebinding) is checked only at the first resolution.
 */
import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"

export interface OutboundPolicy {
  readonly allowPrivateAddresses: boolean
  readonly timeoutMs: number
  /** The most bytes of the answer read (the rest is dropped). */
  readonly maxResponseBytes: number
}

export interface OutboundResponse {
  readonly status: number
  readonly headers: Headers
  /** At most `maxResponseBytes` of the body. */
  readonly body: Uint8Array
}

/** Why a request was not made or got no answer; `message` never holds the receiver's body. */
export class OutboundError extends Error {
  constructor(
    readonly kind: "refused" | "timeout" | "network" | "invalid",
    message: string,
  ) {
    super(message)
  }
}

const MAX_REDIRECTS = 3

const blocked = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.0.0.0", 24],
  ["192.0.2.0", 24],
  ["192.88.99.0", 24],
  ["192.168.0.0", 16],
  ["198.18.0.0", 15],
  ["198.51.100.0", 24],
  ["203.0.113.0", 24],
  ["224.0.0.0", 4],
  ["240.0.0.0", 4],
] as const) {
  blocked.addSubnet(net, prefix, "ipv4")
}
for (const [net, prefix] of [
  ["::", 128],
  ["::1", 128],
  ["64:ff9b::", 96],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(net, prefix, "ipv6")
}

/** Whether an IP address is private, loopback, link-local, metadata or otherwise not a public host. */
export const isPrivateAddress = (address: string): boolean => {
  const family = isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family !== 6) return true
  const lower = address.toLowerCase()
  // An IPv4 address mapped into IPv6 (::ffff:a.b.c.d or ::ffff:xxxx:xxxx) is checked as IPv4.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/.exec(lower)
  if (mapped?.[1] !== undefined) return blocked.check(mapped[1], "ipv4")
  const hexMapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(lower)
  if (hexMapped?.[1] !== undefined && hexMapped[2] !== undefined) {
    const hi = Number.parseInt(hexMapped[1], 16)
    const lo = Number.parseInt(hexMapped[2], 16)
    return blocked.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, "ipv4")
  }
  return blocked.check(address, "ipv6")
}

/** Refuses a URL whose scheme is not http(s) or whose host resolves to any non-public address. */
export const checkUrl = async (url: URL, allowPrivate: boolean): Promise<void> => {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OutboundError("invalid", `only http and https URLs are allowed, not ${url.protocol}`)
  }
  if (allowPrivate) return
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  let addresses: Array<string>
  if (isIP(host) !== 0) addresses = [host]
  else {
    try {
      addresses = (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)
    } catch {
      throw new OutboundError("network", `the host ${host} does not resolve`)
    }
  }
  if (addresses.length === 0) throw new OutboundError("network", `the host ${host} does not resolve`)
  const bad = addresses.find(isPrivateAddress)
  if (bad !== undefined) {
    throw new OutboundError(
      "refused",
      `the host ${host} resolves to a private or reserved address (${bad}); the operator can allow it with outbound.allow_private_addresses`,
    )
  }
}

/** Reads at most `max` bytes of a body, then cancels the rest. */
const readCapped = async (response: Response, max: number): Promise<Uint8Array> => {
  const reader = response.body?.getReader()
  if (reader === undefined) return new Uint8Array(0)
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    const room = max - size
    chunks.push(value.length > room ? value.subarray(0, room) : value)
    size += Math.min(value.length, room)
    if (size >= max) {
      await reader.cancel().catch(() => undefined)
      break
    }
  }
  const out = new Uint8Array(size)
  let at = 0
  for (const c of chunks) {
    out.set(c, at)
    at += c.length
  }
  return out
}

export interface OutboundInit {
  readonly method: string
  readonly headers?: Readonly<Record<string, string>>
  readonly body?: string | Uint8Array
}

/** One request under the policy: checked, bounded in time and size, redirects re-checked. */
export const safeFetch = async (target: string, init: OutboundInit, policy: OutboundPolicy): Promise<OutboundResponse> => {
  let url: URL
  try {
    url = new URL(target)
  } catch {
    throw new OutboundError("invalid", "not a valid URL")
  }
  const signal = AbortSignal.timeout(policy.timeoutMs)
  let method = init.method
  let body = init.body
  try {
    for (let hop = 0; ; hop++) {
      await checkUrl(url, policy.allowPrivateAddresses)
      const response = await fetch(url, {
        method,
        headers: init.headers as Record<string, string> | undefined,
        body: body as BodyInit | undefined,
        redirect: "manual",
        signal,
      })
      const location = response.headers.get("location")
      if (response.status >= 300 && response.status < 400 && location !== null) {
        await response.body?.cancel().catch(() => undefined)
        if (hop >= MAX_REDIRECTS) throw new OutboundError("network", `more than ${MAX_REDIRECTS} redirects`)
        url = new URL(location, url)
        // 303 (and 301/302 after a POST, as browsers do) continue as a GET without a body.
        if (response.status === 303 || ((response.status === 301 || response.status === 302) && method === "POST")) {
          method = "GET"
          body = undefined
        }
        continue
      }
      return { status: response.status, headers: response.headers, body: await readCapped(response, policy.maxResponseBytes) }
    }
  } catch (e) {
    if (e instanceof OutboundError) throw e
    if (signal.aborted) throw new OutboundError("timeout", `no answer within ${policy.timeoutMs} ms`)
    throw new OutboundError("network", `the connection failed (${(e as Error).message ?? String(e)})`)
  }
}
