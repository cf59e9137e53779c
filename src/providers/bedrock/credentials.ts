/**
 * Bedrock's credentials, in order: the config's key pair (`access_key_id_env`,
 * `secret_access_key_env`, `session_token_env`) signed with SigV4; else the Bedrock API key of
 * `api_key_env`, sent as a bearer token; else the standard `AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`. Other sources of the AWS SDKs (profiles,
 * instance or task roles, web identity) are not read. Read from the environment once per provider.
 *
 * A request is signed with SigV4 (headers only) by plain code on Bun's native, synchronous
 * SHA-256 and HMAC (`Bun.CryptoHasher`), and sent through the gateway's own upstream transport,
 * so it keeps the pool, the backpressure and the bounds. The canonical request is built as
 * aws4fetch's `AwsV4Signer` builds it (a test holds the two to the same headers, and to AWS's
 * published vectors); aws4fetch went through crypto.subtle, three awaited digests or HMACs a
 * request (~125 µs of CPU each, ~0.6 µs per event of a 200-delta stream), this takes a few µs.
 */
import { ProviderError, type ProviderConfig } from "../types"

export type BedrockAuth =
  | { readonly kind: "sigv4"; readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken: string | undefined; readonly region: string; readonly cache: Map<string, Uint8Array> }
  | { readonly kind: "bearer"; readonly token: string }

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value === "" ? undefined : value)

/** The credentials of a provider from `env`, or the "auth" error naming what to set (never a value). */
export const bedrockAuthFrom = (config: ProviderConfig, apiKey: string | undefined, env: Record<string, string | undefined>): BedrockAuth | ProviderError => {
  const region = config.region ?? "us-east-1"
  // Derived signing keys, per day and region: four HMACs a request fewer.
  const cache = new Map<string, Uint8Array>()
  if (config.access_key_id_env !== undefined) {
    const accessKeyId = nonEmpty(env[config.access_key_id_env])
    const secretAccessKey = config.secret_access_key_env === undefined ? undefined : nonEmpty(env[config.secret_access_key_env])
    if (accessKeyId === undefined || secretAccessKey === undefined) {
      return new ProviderError("auth", `bedrock provider ${config.id}: ${config.access_key_id_env} and ${config.secret_access_key_env ?? "secret_access_key_env"} must both be set`)
    }
    const sessionToken = config.session_token_env === undefined ? undefined : nonEmpty(env[config.session_token_env])
    return { kind: "sigv4", accessKeyId, secretAccessKey, sessionToken, region, cache }
  }
  const key = nonEmpty(apiKey)
  if (key !== undefined) return { kind: "bearer", token: key }
  const accessKeyId = nonEmpty(env["AWS_ACCESS_KEY_ID"])
  const secretAccessKey = nonEmpty(env["AWS_SECRET_ACCESS_KEY"])
  if (accessKeyId !== undefined && secretAccessKey !== undefined) {
    return { kind: "sigv4", accessKeyId, secretAccessKey, sessionToken: nonEmpty(env["AWS_SESSION_TOKEN"]), region, cache }
  }
  return new ProviderError(
    "auth",
    `bedrock provider ${config.id} has no credentials: set access_key_id_env and secret_access_key_env, or api_key_env, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY`,
  )
}

const resolved = new WeakMap<ProviderConfig, BedrockAuth | ProviderError>()

/** The provider's credentials, read from the environment on its first call. */
export const bedrockAuth = (config: ProviderConfig, apiKey: string | undefined): BedrockAuth | ProviderError => {
  let auth = resolved.get(config)
  if (auth === undefined) {
    auth = bedrockAuthFrom(config, apiKey, process.env)
    resolved.set(config, auth)
  }
  return auth
}

const hex = (data: string): string => new Bun.CryptoHasher("sha256").update(data).digest("hex")
const hmac = (key: string | Uint8Array, data: string): Uint8Array => new Bun.CryptoHasher("sha256", key).update(data).digest() as Uint8Array

/** aws4fetch's `encodeRfc3986`: the characters encodeURIComponent leaves that RFC 3986 reserves. */
const rfc3986 = (encoded: string): string => encoded.replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`)

/** The canonical URI and query of a URL (not S3: the path encoded once more, as received), per URL. */
const canonicalUrls = new Map<string, { readonly host: string; readonly path: string; readonly query: string }>()
const canonicalUrl = (url: string): { readonly host: string; readonly path: string; readonly query: string } => {
  let known = canonicalUrls.get(url)
  if (known !== undefined) return known
  const parsed = new URL(url)
  const path = rfc3986(encodeURIComponent(parsed.pathname.replace(/\/+/g, "/")).replace(/%2F/g, "/"))
  const query = [...parsed.searchParams]
    .filter(([k]) => k !== "")
    .map(([k, v]) => [rfc3986(encodeURIComponent(k)), rfc3986(encodeURIComponent(v))] as const)
    .sort(([k1, v1], [k2, v2]) => (k1 < k2 ? -1 : k1 > k2 ? 1 : v1 < v2 ? -1 : v1 > v2 ? 1 : 0))
    .map(([k, v]) => `${k}=${v}`)
    .join("&")
  known = { host: parsed.host, path, query }
  // The URLs of a process are its providers' models and routes: a few; bounded all the same.
  if (canonicalUrls.size >= 1024) canonicalUrls.clear()
  canonicalUrls.set(url, known)
  return known
}

/**
 * The auth headers of a POST of `body` to `url` (as sent: the path's percent-encoding is what is
 * signed). SigV4 signs host, x-amz-date and the session token; content-type and accept go unsigned.
 * The signing key is derived once per secret, day and region (`auth.cache`).
 */
export const authHeaders = (auth: BedrockAuth, url: string, body: string, datetime?: string): Record<string, string> => {
  if (auth.kind === "bearer") return { authorization: `Bearer ${auth.token}` }
  const amzDate = datetime ?? new Date().toISOString().replace(/[:-]|\.\d{3}/g, "")
  const date = amzDate.slice(0, 8)
  const { host, path, query } = canonicalUrl(url)
  const token = auth.sessionToken
  // Sorted: host < x-amz-date < x-amz-security-token.
  const signedHeaders = token === undefined ? "host;x-amz-date" : "host;x-amz-date;x-amz-security-token"
  const canonicalHeaders = `host:${host}\nx-amz-date:${amzDate}\n${token === undefined ? "" : `x-amz-security-token:${token.replace(/\s+/g, " ")}\n`}`
  const canonical = `POST\n${path}\n${query}\n${canonicalHeaders}\n${signedHeaders}\n${hex(body)}`
  const scope = `${date}/${auth.region}/bedrock/aws4_request`
  const cacheKey = `${date}/${auth.region}`
  let key = auth.cache.get(cacheKey)
  if (key === undefined) {
    key = hmac(hmac(hmac(hmac(`AWS4${auth.secretAccessKey}`, date), auth.region), "bedrock"), "aws4_request")
    // One key a day: the previous days' go.
    auth.cache.clear()
    auth.cache.set(cacheKey, key)
  }
  const signature = new Bun.CryptoHasher("sha256", key).update(`AWS4-HMAC-SHA256\n${amzDate}\n${scope}\n${hex(canonical)}`).digest("hex")
  const headers: Record<string, string> = {
    "x-amz-date": amzDate,
    authorization: `AWS4-HMAC-SHA256 Credential=${auth.accessKeyId}/${scope}, SignedHeaders=${signedHeaders}, Signature=${signature}`,
  }
  if (token !== undefined) headers["x-amz-security-token"] = token
  return headers
}
