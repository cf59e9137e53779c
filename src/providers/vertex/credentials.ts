/**
 * Vertex AI's access token, from a service account's JSON key: a JWT signed with its private key
 * (RS256, crypto.subtle) is exchanged at the token endpoint (OAuth 2.0 JWT bearer grant) for an
 * access token, which is kept until shortly before it expires; calls meanwhile share one exchange.
 * Nothing of the key, the assertion or the token goes into a message: they say the provider,
 * the file's path and the endpoint's status and error code at most.
 */
import { readFileSync } from "node:fs"
import { Either, ParseResult, Schema } from "effect"
import { type ProviderConfig, ProviderError } from "../types"

export const DEFAULT_TOKEN_URL = "https://oauth2.googleapis.com/token"
export const CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
/** A token is exchanged again this long before it expires, so a call never carries one about to lapse. */
export const REFRESH_MARGIN_MS = 60_000
const EXCHANGE_TIMEOUT_MS = 30_000

/** The fields of a service account's JSON key the exchange uses. */
export const ServiceAccountKey = Schema.Struct({
  client_email: Schema.String,
  private_key: Schema.String,
  private_key_id: Schema.optional(Schema.String),
  token_uri: Schema.optional(Schema.String),
})
export type ServiceAccountKey = typeof ServiceAccountKey.Type

/** RFC 6750's b64token, the form an access token must have to be sent as `Bearer <token>`. */
const BEARER_TOKEN = /^[A-Za-z0-9\-._~+/]+=*$/

const TokenAnswer = Schema.Struct({ access_token: Schema.String, expires_in: Schema.Number })
const TokenRefusal = Schema.Struct({ error: Schema.optional(Schema.String), error_description: Schema.optional(Schema.String) })

const decodeKey = Schema.decodeUnknownEither(ServiceAccountKey)
const decodeAnswer = Schema.decodeUnknownEither(TokenAnswer)
const decodeRefusal = Schema.decodeUnknownEither(TokenRefusal)

const base64url = (bytes: Uint8Array): string => Buffer.from(bytes).toString("base64url")
const utf8 = new TextEncoder()

/** The DER bytes of a PKCS#8 PEM key (`-----BEGIN PRIVATE KEY-----`, as Google writes service-account keys). */
const pkcs8Der = (pem: string): Uint8Array<ArrayBuffer> | undefined => {
  const match = /-----BEGIN PRIVATE KEY-----([\s\S]+?)-----END PRIVATE KEY-----/.exec(pem)
  return match === null ? undefined : Uint8Array.from(Buffer.from((match[1] as string).replace(/\s+/g, ""), "base64"))
}

export interface TokenSourceOptions {
  /** The clock (ms since the epoch); tests move it. */
  readonly now?: () => number
  /** The exchange's deadline (default 30 s). */
  readonly timeoutMs?: number
}

export class GoogleTokenSource {
  private current: { readonly header: string; readonly expiresAt: number } | undefined
  private pending: Promise<string> | undefined
  private signingKey: Promise<CryptoKey> | undefined
  private readonly now: () => number

  constructor(
    private readonly key: ServiceAccountKey,
    readonly tokenUrl: string,
    /** Who the token is for, in messages (the provider's id). */
    private readonly label: string,
    private readonly options: TokenSourceOptions = {},
  ) {
    this.now = options.now ?? Date.now
  }

  /** `Bearer <token>`: the cached one while it has more than the margin left, else a new exchange. */
  authorization(): Promise<string> {
    const current = this.current
    if (current !== undefined && this.now() < current.expiresAt - REFRESH_MARGIN_MS) return Promise.resolve(current.header)
    this.pending ??= this.exchange().finally(() => {
      this.pending = undefined
    })
    return this.pending
  }

  /** Drops the cached token (the upstream refused it): the next call exchanges again. */
  invalidate(): void {
    this.current = undefined
  }

  private importKey(): Promise<CryptoKey> {
    const der = pkcs8Der(this.key.private_key)
    if (der === undefined) return Promise.reject(this.refused("its private_key is not a PKCS#8 PEM key"))
    return crypto.subtle
      .importKey("pkcs8", der, { name: "RSASSA-PKCS1-v1_5", hash: "SHA-256" }, false, ["sign"])
      .catch(() => Promise.reject(this.refused("its private_key is not a usable RSA key")))
  }

  /** The signed JWT assertion of the JWT bearer grant (RFC 7523), valid one hour. */
  async assertion(): Promise<string> {
    // Imported once; a key that does not import is tried again (and refused again) next time.
    if (this.signingKey === undefined) {
      this.signingKey = this.importKey().catch((e: unknown) => {
        this.signingKey = undefined
        throw e
      })
    }
    const key = await this.signingKey
    const issuedAt = Math.floor(this.now() / 1000)
    const header = { alg: "RS256", typ: "JWT", ...(this.key.private_key_id === undefined ? {} : { kid: this.key.private_key_id }) }
    const claims = { iss: this.key.client_email, scope: CLOUD_PLATFORM_SCOPE, aud: this.tokenUrl, iat: issuedAt, exp: issuedAt + 3600 }
    const unsigned = `${base64url(utf8.encode(JSON.stringify(header)))}.${base64url(utf8.encode(JSON.stringify(claims)))}`
    const signature = await crypto.subtle.sign("RSASSA-PKCS1-v1_5", key, utf8.encode(unsigned))
    return `${unsigned}.${base64url(new Uint8Array(signature))}`
  }

  private async exchange(): Promise<string> {
    const assertion = await this.assertion()
    const startedAt = this.now()
    let response: Response
    try {
      response = await fetch(this.tokenUrl, {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded", accept: "application/json" },
        body: new URLSearchParams({ grant_type: "urn:ietf:params:oauth:grant-type:jwt-bearer", assertion }).toString(),
        signal: AbortSignal.timeout(this.options.timeoutMs ?? EXCHANGE_TIMEOUT_MS),
      })
    } catch {
      throw new ProviderError("connection", `vertex provider ${this.label}: the token endpoint ${this.tokenUrl} could not be reached`)
    }
    const text = await response.text().catch(() => "")
    let json: unknown
    try {
      json = JSON.parse(text)
    } catch {
      json = undefined
    }
    if (!response.ok) {
      const refusal = Either.getOrUndefined(decodeRefusal(json))
      const reason = [refusal?.error, refusal?.error_description].filter((s) => s !== undefined).join(": ").slice(0, 200)
      const what = `vertex provider ${this.label}: the token endpoint answered ${response.status}${reason === "" ? "" : ` (${reason})`}`
      // A refused grant is our credentials; the endpoint failing is not.
      throw new ProviderError(response.status >= 500 || response.status === 429 ? "connection" : "auth", what)
    }
    const answer = decodeAnswer(json)
    if (Either.isLeft(answer)) {
      // A 200 that is no token (an HTML page, a proxy's body) is the endpoint failing, not a refused grant: another endpoint may serve.
      throw new ProviderError("connection", `vertex provider ${this.label}: the token endpoint's answer has no access_token and expires_in`)
    }
    // A token that cannot be a bearer token (RFC 6750's b64token: empty, a line break, a space) would
    // fail every call until it expired: the token endpoint misbehaved, so it is not kept.
    if (!BEARER_TOKEN.test(answer.right.access_token)) {
      throw new ProviderError("connection", `vertex provider ${this.label}: the token endpoint answered an access_token that is not a bearer token`)
    }
    const header = `Bearer ${answer.right.access_token}`
    this.current = { header, expiresAt: startedAt + answer.right.expires_in * 1000 }
    return header
  }

  private refused(why: string): ProviderError {
    return new ProviderError("auth", `vertex provider ${this.label}: the service-account key ${why}`)
  }
}

/** Reads and checks a service-account key file; the error names the file and the rule, never its content. */
export const readServiceAccountKey = (path: string, label: string): ServiceAccountKey => {
  let text: string
  try {
    text = readFileSync(path, "utf8")
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? "unreadable"
    throw new ProviderError("auth", `vertex provider ${label}: cannot read the credentials file ${path} (${code})`)
  }
  let json: unknown
  try {
    json = JSON.parse(text)
  } catch {
    throw new ProviderError("auth", `vertex provider ${label}: the credentials file ${path} is not JSON`)
  }
  const key = decodeKey(json)
  if (Either.isLeft(key)) {
    const issue = ParseResult.ArrayFormatter.formatErrorSync(key.left)[0]
    const field = issue === undefined ? "" : ` (${issue.path.join(".")}: ${issue.message})`
    throw new ProviderError("auth", `vertex provider ${label}: the credentials file ${path} is not a service-account key${field}`)
  }
  return key.right
}

const sources = new Map<string, GoogleTokenSource>()

/**
 * The token source of a vertex provider: its `credentials_file`, else the file named by
 * `GOOGLE_APPLICATION_CREDENTIALS`; read once, on its first call.
 */
export const tokenSourceFor = (config: ProviderConfig): GoogleTokenSource => {
  const path = config.credentials_file ?? process.env["GOOGLE_APPLICATION_CREDENTIALS"]
  if (path === undefined || path === "") {
    throw new ProviderError("auth", `vertex provider ${config.id}: no credentials (set credentials_file, or GOOGLE_APPLICATION_CREDENTIALS)`)
  }
  const id = `${config.id}\n${path}\n${config.token_url ?? ""}`
  let source = sources.get(id)
  if (source === undefined) {
    const key = readServiceAccountKey(path, config.id)
    source = new GoogleTokenSource(key, config.token_url ?? key.token_uri ?? DEFAULT_TOKEN_URL, config.id, config.timeout_ms === undefined ? {} : { timeoutMs: config.timeout_ms })
    sources.set(id, source)
  }
  return source
}
