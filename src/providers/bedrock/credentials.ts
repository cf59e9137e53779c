/**
 * Bedrock's credentials, in order: the config's key pair (`access_key_id_env`,
 * `secret_access_key_env`, `session_token_env`) signed with SigV4; else the Bedrock API key of
 * `api_key_env`, sent as a bearer token; else the standard `AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`. Other sources of the AWS SDKs (profiles,
 * instance or task roles, web identity) are not read. Read from the environment once per provider.
 *
 * A request is signed with aws4fetch's `AwsV4Signer` (headers only) and sent through the
 * gateway's own upstream transport, so it keeps the pool, the backpressure and the bounds.
 */
import { AwsV4Signer } from "aws4fetch"
import { ProviderError, type ProviderConfig } from "../types"

export type BedrockAuth =
  | { readonly kind: "sigv4"; readonly accessKeyId: string; readonly secretAccessKey: string; readonly sessionToken: string | undefined; readonly region: string; readonly cache: Map<string, ArrayBuffer> }
  | { readonly kind: "bearer"; readonly token: string }

const nonEmpty = (value: string | undefined): string | undefined => (value === undefined || value === "" ? undefined : value)

/** The credentials of a provider from `env`, or the "auth" error naming what to set (never a value). */
export const bedrockAuthFrom = (config: ProviderConfig, apiKey: string | undefined, env: Record<string, string | undefined>): BedrockAuth | ProviderError => {
  const region = config.region ?? "us-east-1"
  // Derived signing keys, per day and region: four HMACs a request fewer.
  const cache = new Map<string, ArrayBuffer>()
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

/**
 * The auth headers of a POST of `body` to `url` (as sent: the path's percent-encoding is what is
 * signed). SigV4 signs host, x-amz-date and the session token; content-type and accept go unsigned.
 */
export const authHeaders = async (auth: BedrockAuth, url: string, body: string, datetime?: string): Promise<Record<string, string>> => {
  if (auth.kind === "bearer") return { authorization: `Bearer ${auth.token}` }
  const signer = new AwsV4Signer({
    method: "POST",
    url,
    body,
    accessKeyId: auth.accessKeyId,
    secretAccessKey: auth.secretAccessKey,
    ...(auth.sessionToken === undefined ? {} : { sessionToken: auth.sessionToken }),
    service: "bedrock",
    region: auth.region,
    cache: auth.cache,
    ...(datetime === undefined ? {} : { datetime }),
  })
  const signed = await signer.sign()
  const headers: Record<string, string> = {}
  signed.headers.forEach((value, name) => {
    headers[name] = value
  })
  return headers
}
