/**
 * The safe outbound fetcher: every request the gateway makes to a URL a tenant gave (broadcast
 * destinations, the file-parser's `file_url`, later web fetches) goes through it. The host is
 * resolved once and every address checked: private, loopback, link-local, CGNAT, multicast,
 * reserved and cloud-metadata addresses are refused unless the operator allows them
 * (`outbound.allow_private_addresses`, for collectors inside the network). The connection then
 * goes to the address that was checked (the Host header and the TLS server name keep the name),
 * so a name whose records change between check and connect (DNS rebinding) gains nothing.
 * Decimal, octal and hex IPv4 forms are normalised by the URL parser before the check; IPv4
 * embedded in IPv6 (mapped, compatible, translated, 6to4, Teredo) is checked as IPv4, and
 * site-local fec0::/10 is refused. No proxy is used (it would skip the check). Redirects are
 * re-checked hop by hop (at most MAX_REDIRECTS). A deadline covers the whole exchange, at most
 * `maxResponseBytes` of the answer are read, and at most `maxConcurrent` fetches run at once
 * across the process (the rest wait, within their deadline).
 */
import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { checkServerIdentity } from "node:tls"

export interface OutboundPolicy {
  readonly allowPrivateAddresses: boolean
  readonly timeoutMs: number
  /** The most bytes of the answer read (the rest is dropped). */
  readonly maxResponseBytes: number
  /** An answer longer than `maxResponseBytes` fails (`too_large`) instead of being cut. */
  readonly failOverCap?: boolean
  /** The caller's own deadline (a request's), on top of `timeoutMs`. */
  readonly signal?: AbortSignal
  /** Name resolution (tests give their own; default the system resolver). */
  readonly resolve?: (host: string) => Promise<ReadonlyArray<string>>
}

/** Sent on every outbound request: the receiver can tell who calls. */
export const OUTBOUND_USER_AGENT = "model-routing-gateway/1 (+outbound fetcher)"

/** Outbound fetches in flight at once across the process (`outbound.max_concurrent`). */
export const DEFAULT_MAX_CONCURRENT_OUTBOUND = 32

let maxConcurrent = DEFAULT_MAX_CONCURRENT_OUTBOUND
let running = 0
const waiting: Array<() => void> = []

/** Sets the process-wide cap on concurrent outbound fetches (from config at start). */
export const setOutboundConcurrency = (max: number): void => {
  maxConcurrent = Math.max(1, max)
}

/** Outbound fetches running now and waiting for a slot (for tests and metrics). */
export const outboundLoad = (): { readonly running: number; readonly waiting: number } => ({ running, waiting: waiting.length })

const acquire = (signal: AbortSignal): Promise<void> => {
  if (running < maxConcurrent) {
    running++
    return Promise.resolve()
  }
  return new Promise((resolve, reject) => {
    const grant = () => {
      signal.removeEventListener("abort", onAbort)
      running++
      resolve()
    }
    const onAbort = () => {
      const at = waiting.indexOf(grant)
      if (at >= 0) waiting.splice(at, 1)
      reject(signal.reason)
    }
    waiting.push(grant)
    signal.addEventListener("abort", onAbort, { once: true })
  })
}

const release = (): void => {
  running--
  const next = waiting.shift()
  if (next !== undefined) next()
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
    readonly kind: "refused" | "timeout" | "network" | "invalid" | "too_large",
    message: string,
  ) {
    super(message)
  }
}

export const MAX_REDIRECTS = 5

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
  ["64:ff9b:1::", 48],
  ["100::", 64],
  ["2001:db8::", 32],
  ["fc00::", 7],
  ["fe80::", 10],
  // Site-local (deprecated by RFC 3879, still routed inside some networks).
  ["fec0::", 10],
  ["ff00::", 8],
] as const) {
  blocked.addSubnet(net, prefix, "ipv6")
}

/** An IPv6 address as its eight 16-bit groups (a trailing dotted IPv4 is two groups), or undefined. */
const ipv6Groups = (address: string): Array<number> | undefined => {
  let text = address.toLowerCase()
  const zone = text.indexOf("%")
  if (zone >= 0) text = text.slice(0, zone)
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text)
  if (dotted !== null) {
    const [a, b, c, d] = dotted.slice(1).map(Number) as [number, number, number, number]
    text = `${text.slice(0, dotted.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`
  }
  const halves = text.split("::")
  if (halves.length > 2) return undefined
  const parse = (part: string) => (part === "" ? [] : part.split(":").map((g) => Number.parseInt(g, 16)))
  const head = parse(halves[0] as string)
  const tail = halves.length === 2 ? parse(halves[1] as string) : []
  const fill = 8 - head.length - tail.length
  if (halves.length === 2 ? fill < 0 : fill !== 0) return undefined
  const groups = [...head, ...new Array<number>(fill).fill(0), ...tail]
  return groups.some((g) => !Number.isInteger(g) || g < 0 || g > 0xffff) ? undefined : groups
}

const ipv4Of = (hi: number, lo: number): string => `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`

/**
 * The IPv4 addresses an IPv6 address carries, which the network may deliver to: mapped
 * (`::ffff:a.b.c.d`), compatible (`::a.b.c.d`), translated (`::ffff:0:a.b.c.d`), 6to4
 * (`2002:AABB:CCDD::/16`) and Teredo (`2001:0::/32`: the server in bits 32-63, the client in the
 * last 32 bits, inverted), RFC 4291, 2765, 3056 and 4380.
 */
const embeddedIpv4 = (g: ReadonlyArray<number>): ReadonlyArray<string> => {
  const [g0, g1, g2, g3, g4, g5, g6, g7] = g as [number, number, number, number, number, number, number, number]
  const zeroTo3 = g0 === 0 && g1 === 0 && g2 === 0 && g3 === 0
  if (zeroTo3 && g4 === 0 && (g5 === 0xffff || g5 === 0)) return [ipv4Of(g6, g7)]
  if (zeroTo3 && g4 === 0xffff && g5 === 0) return [ipv4Of(g6, g7)]
  if (g0 === 0x2002) return [ipv4Of(g1, g2)]
  if (g0 === 0x2001 && g1 === 0) return [ipv4Of(g2, g3), ipv4Of(g6 ^ 0xffff, g7 ^ 0xffff)]
  return []
}

/**
 * Whether an IP address is private, loopback, link-local, metadata or otherwise not a public host.
 * An IPv6 address that embeds an IPv4 one is judged by the IPv4 address (every embedded one must
 * be public); a form that cannot be parsed is refused.
 */
export const isPrivateAddress = (address: string): boolean => {
  const family = isIP(address)
  if (family === 4) return blocked.check(address, "ipv4")
  if (family !== 6) return true
  const groups = ipv6Groups(address)
  if (groups === undefined) return true
  const embedded = embeddedIpv4(groups)
  if (embedded.length > 0) return embedded.some((v4) => blocked.check(v4, "ipv4"))
  return blocked.check(address, "ipv6")
}

const systemResolve = async (host: string): Promise<ReadonlyArray<string>> =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => a.address)

/**
 * Resolves the URL's host once and checks every address; returns the addresses to connect to
 * (IPv4 first). Refuses a scheme other than http(s) and, unless allowed, any non-public address.
 */
export const resolveChecked = async (
  url: URL,
  allowPrivate: boolean,
  resolve: (host: string) => Promise<ReadonlyArray<string>> = systemResolve,
): Promise<ReadonlyArray<string>> => {
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new OutboundError("invalid", `only http and https URLs are allowed, not ${url.protocol}`)
  }
  // The URL parser has already turned 2130706433, 0177.0.0.1 and 0x7f.1 into 127.0.0.1.
  const host = url.hostname.startsWith("[") ? url.hostname.slice(1, -1) : url.hostname
  let addresses: ReadonlyArray<string>
  if (isIP(host) !== 0) addresses = [host]
  else {
    try {
      addresses = await resolve(host)
    } catch {
      throw new OutboundError("network", `the host ${host} does not resolve`)
    }
  }
  if (addresses.length === 0) throw new OutboundError("network", `the host ${host} does not resolve`)
  if (!allowPrivate) {
    const bad = addresses.find(isPrivateAddress)
    if (bad !== undefined) {
      throw new OutboundError(
        "refused",
        `the host ${host} resolves to a private or reserved address (${bad}); the operator can allow it with outbound.allow_private_addresses`,
      )
    }
  }
  return [...addresses.filter((a) => isIP(a) === 4), ...addresses.filter((a) => isIP(a) !== 4)]
}

/** Refuses a URL whose scheme is not http(s) or whose host resolves to any non-public address. */
export const checkUrl = async (url: URL, allowPrivate: boolean): Promise<void> => {
  await resolveChecked(url, allowPrivate)
}

/**
 * Why `target` may not be fetched under the policy, or undefined: a URL that is not http(s) or a
 * host that is or resolves to a non-public address. A name that does not resolve within
 * `timeoutMs` passes (it is checked again at each fetch).
 */
export const refusalOf = async (target: string, allowPrivate: boolean, timeoutMs: number): Promise<string | undefined> => {
  let url: URL
  try {
    url = new URL(target)
  } catch {
    return "not a valid URL"
  }
  const within = (host: string) =>
    Promise.race([
      systemResolve(host),
      new Promise<never>((_, reject) => setTimeout(() => reject(new Error("no answer")), timeoutMs).unref()),
    ])
  try {
    await resolveChecked(url, allowPrivate, within)
    return undefined
  } catch (e) {
    return e instanceof OutboundError && e.kind !== "network" ? e.message : undefined
  }
}

/** Reads at most `max` bytes of a body, then cancels the rest. */
const readCapped = async (response: Response, max: number, failOver: boolean): Promise<Uint8Array> => {
  const reader = response.body?.getReader()
  if (reader === undefined) return new Uint8Array(0)
  const chunks: Array<Uint8Array> = []
  let size = 0
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    const room = max - size
    if (failOver && value.length > room) {
      await reader.cancel().catch(() => undefined)
      throw new OutboundError("too_large", `the answer is larger than ${max} bytes`)
    }
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

/** The request to one checked address: the URL's host stays in the Host header and the TLS name. */
const pinnedFetch = (url: URL, address: string, init: RequestInit, headers: Record<string, string>): Promise<Response> => {
  const target = new URL(url)
  target.hostname = isIP(address) === 6 ? `[${address}]` : address
  const name = url.hostname
  const tls =
    url.protocol === "https:"
      ? { serverName: name, checkServerIdentity: (_host: string, cert: Parameters<typeof checkServerIdentity>[1]) => checkServerIdentity(name, cert) }
      : undefined
  const options: BunFetchRequestInit = { ...init, headers: { ...headers, host: url.host }, proxy: false, ...(tls === undefined ? {} : { tls }) }
  return fetch(target, options)
}

/** One request under the policy: checked, pinned to the checked address, bounded in time, size and concurrency, redirects re-checked. */
export const safeFetch = async (target: string, init: OutboundInit, policy: OutboundPolicy): Promise<OutboundResponse> => {
  let url: URL
  try {
    url = new URL(target)
  } catch {
    throw new OutboundError("invalid", "not a valid URL")
  }
  const timeout = AbortSignal.timeout(policy.timeoutMs)
  const signal = policy.signal === undefined ? timeout : AbortSignal.any([timeout, policy.signal])
  const headers: Record<string, string> = { "user-agent": OUTBOUND_USER_AGENT, ...init.headers }
  let method = init.method
  let body = init.body
  try {
    await acquire(signal)
  } catch {
    throw new OutboundError("timeout", `no outbound slot within ${policy.timeoutMs} ms`)
  }
  try {
    for (let hop = 0; ; hop++) {
      const addresses = await resolveChecked(url, policy.allowPrivateAddresses, policy.resolve)
      let response: Response | undefined
      let lastError: unknown
      for (const address of addresses) {
        try {
          response = await pinnedFetch(url, address, { method, body: body as BodyInit | undefined, redirect: "manual", signal }, headers)
          break
        } catch (e) {
          if (signal.aborted) throw e
          lastError = e
        }
      }
      if (response === undefined) throw lastError
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
      return {
        status: response.status,
        headers: response.headers,
        body: await readCapped(response, policy.maxResponseBytes, policy.failOverCap === true),
      }
    }
  } catch (e) {
    if (e instanceof OutboundError) throw e
    if (timeout.aborted) throw new OutboundError("timeout", `no answer within ${policy.timeoutMs} ms`)
    if (signal.aborted) throw new OutboundError("timeout", "the request's deadline passed")
    throw new OutboundError("network", `the connection failed (${(e as Error).message ?? String(e)})`)
  } finally {
    release()
  }
}
