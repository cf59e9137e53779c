/**
 * Domain filters of the web tools and plugins: `example.com` (the domain and its subdomains),
 * `*.example.com` (a wildcard, picomatch), `example.com/blog` (a path prefix). Compiled once per call.
 */
import picomatch from "picomatch"

const hostMatcher = (host: string): ((hostname: string) => boolean) => {
  if (host.includes("*") || host.includes("?") || host.includes("[")) return picomatch(host, { nocase: true, dot: true })
  return (hostname) => hostname === host || hostname.endsWith(`.${host}`)
}

const matcherOf = (pattern: string): ((url: URL) => boolean) => {
  const lower = pattern.toLowerCase()
  const slash = lower.indexOf("/")
  const host = hostMatcher(slash < 0 ? lower : lower.slice(0, slash))
  const path = slash < 0 ? undefined : lower.slice(slash)
  return (url) => host(url.hostname.toLowerCase()) && (path === undefined || url.pathname.toLowerCase().startsWith(path))
}

/** Whether a pattern is a plain domain (an engine's own filter takes it as it is). */
export const isPlainDomain = (pattern: string): boolean => /^[a-z0-9.-]+$/i.test(pattern)

/** A URL's verdict under `allowed` (any matches; none given: all) and `excluded` (none matches). Not http(s): refused. */
export const domainFilter = (
  allowed: ReadonlyArray<string> | undefined,
  excluded: ReadonlyArray<string> | undefined,
): ((url: string) => boolean) => {
  const keep = allowed === undefined || allowed.length === 0 ? undefined : allowed.map(matcherOf)
  const drop = excluded === undefined || excluded.length === 0 ? undefined : excluded.map(matcherOf)
  return (raw) => {
    let url: URL
    try {
      url = new URL(raw)
    } catch {
      return false
    }
    if (url.protocol !== "http:" && url.protocol !== "https:") return false
    if (keep !== undefined && !keep.some((m) => m(url))) return false
    return drop === undefined || !drop.some((m) => m(url))
  }
}
