/**
 * The console's calls to the gateway's API (the same /v1 endpoints as any client). The key lives
 * in this tab's session storage and goes out as a bearer header: never in a URL, a cookie or the
 * page (docs/console.md says why this rather than a cookie session).
 */
const STORAGE = "gateway-console-key"

export const storedKey = (): string | null => sessionStorage.getItem(STORAGE)
export const rememberKey = (key: string) => sessionStorage.setItem(STORAGE, key)
export const forgetKey = () => sessionStorage.removeItem(STORAGE)

/** A refusal of the API: its status, message and, when the message names one, the field. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly field: string | null,
  ) {
    super(message)
  }
}

/** The field an error message names: the API's 400s read "Invalid request: <field>: <rule>". */
export const fieldOf = (message: string): string | null => /^Invalid request: ([A-Za-z_][\w.[\]]*): /.exec(message)?.[1] ?? null

export interface CallOptions {
  readonly method?: "GET" | "POST" | "PATCH" | "DELETE"
  readonly json?: unknown
  readonly key?: string
  readonly signal?: AbortSignal
}

export const call = async <T>(path: string, options: CallOptions = {}): Promise<T> => {
  const key = options.key ?? storedKey()
  const headers: Record<string, string> = {}
  if (key !== null) headers.authorization = `Bearer ${key}`
  if (options.json !== undefined) headers["content-type"] = "application/json"
  let res: Response
  try {
    res = await fetch(path, {
      method: options.method ?? "GET",
      headers,
      body: options.json === undefined ? null : JSON.stringify(options.json),
      signal: options.signal ?? null,
      credentials: "omit",
      cache: "no-store",
    })
  } catch (e) {
    throw new ApiError(0, `The gateway could not be reached (${String(e)})`, null)
  }
  const text = await res.text()
  let body: unknown = null
  try {
    body = text === "" ? null : JSON.parse(text)
  } catch {
    body = null
  }
  if (!res.ok) {
    const message = (body as { error?: { message?: unknown } } | null)?.error?.message
    const text = typeof message === "string" ? message : `HTTP ${res.status}`
    throw new ApiError(res.status, text, fieldOf(text))
  }
  return body as T
}

/** Pages a list asks for at most; 100 items a page. */
const MAX_PAGES = 100

/**
 * Every item of a list operation, page by page (`limit=100`, `offset` moved on while a page is
 * full): a page shows the whole list, not its first 100 items (a preset's 101st version, the one
 * in use, was missing).
 */
export const callAll = async <T>(path: string, options: { readonly signal?: AbortSignal } = {}): Promise<{ data: Array<T> }> => {
  const all: Array<T> = []
  const joiner = path.includes("?") ? "&" : "?"
  for (let page = 0; page < MAX_PAGES; page++) {
    const { data } = await call<{ data: Array<T> }>(`${path}${joiner}limit=100&offset=${all.length}`, options)
    all.push(...data)
    if (data.length < 100) break
  }
  return { data: all }
}

/** Query string of the defined, non-empty values. */
export const query = (params: Record<string, string | number | undefined | null>): string => {
  const q = new URLSearchParams()
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== "") q.set(k, String(v))
  const s = q.toString()
  return s === "" ? "" : `?${s}`
}

export const usd = (n: number | null | undefined): string =>
  n == null ? "—" : n === 0 ? "$0" : Math.abs(n) < 0.01 ? `$${n.toPrecision(3)}` : `$${n.toFixed(2)}`

export const int = (n: number | null | undefined): string => (n == null ? "—" : Math.round(n).toLocaleString("en-US"))

export const today = (): string => new Date().toISOString().slice(0, 10)
export const daysBefore = (day: string, n: number): string => new Date(Date.parse(`${day}T00:00:00Z`) - n * 86_400_000).toISOString().slice(0, 10)

// ---- wire shapes the console reads (a subset of each) ----

export interface CurrentKey {
  readonly data: { readonly label: string; readonly is_management_key: boolean; readonly workspace_id: string; readonly usage: number; readonly limit: number | null }
}

export interface Totals {
  readonly requests: number
  readonly usage: number
  readonly byok_usage: number
  readonly prompt_tokens: number
  readonly completion_tokens: number
  readonly reasoning_tokens: number
  readonly errors: number
}

export interface Summary {
  readonly data: {
    readonly from: string
    readonly to: string
    readonly totals: Totals
    readonly days: ReadonlyArray<Totals & { readonly date: string }>
    readonly by_model: ReadonlyArray<Totals & { readonly model: string }>
    readonly by_provider: ReadonlyArray<
      Totals & { readonly provider_name: string; readonly latency_p50_ms: number | null; readonly latency_p99_ms: number | null; readonly latency_avg_ms: number | null }
    >
    readonly by_key: ReadonlyArray<Totals & { readonly api_key_hash: string; readonly name: string | null }>
    readonly errors_by_status: ReadonlyArray<{ readonly status: number; readonly count: number }>
  }
}

export interface Generation {
  readonly id: string
  readonly model: string
  readonly upstream_model: string
  readonly provider_name: string
  readonly api_key_hash: string
  readonly workspace_id: string
  readonly created_at: string
  readonly status: string
  readonly total_cost: number
  readonly is_byok: boolean
  readonly tokens_prompt: number
  readonly tokens_completion: number
  readonly native_tokens_reasoning: number
  readonly native_tokens_cached: number
  readonly native_tokens_cache_write: number
  readonly usage_estimated: boolean
  readonly generation_time: number
  readonly latency: number | null
  readonly finish_reason: string | null
  readonly streamed: boolean
  readonly cancelled: boolean
  readonly session_id: string | null
  readonly has_content: boolean
  readonly app_name: string | null
  readonly http_referer: string | null
  readonly user_agent: string | null
  readonly router: string | null
  readonly parent_generation_id: string | null
  readonly num_search_results: number | null
  readonly num_fetches: number | null
  readonly web_search_engine: string | null
}

export interface ApiKey {
  readonly hash: string
  readonly name: string
  readonly label: string
  readonly disabled: boolean
  readonly limit: number | null
  readonly limit_remaining: number | null
  readonly limit_reset: string | null
  readonly usage: number
  readonly usage_daily: number
  readonly usage_monthly: number
  readonly workspace_id: string
  readonly is_management_key: boolean
  readonly created_at: string
  /** The key's own request rate limit (null: none). */
  readonly rate_limit: { readonly requests: number; readonly interval: string } | null
}

export interface Workspace {
  readonly id: string
  readonly name: string
  readonly slug: string
  readonly description: string | null
  readonly default_text_model: string | null
  readonly is_observability_broadcast_enabled: boolean
  readonly is_observability_io_logging_enabled: boolean
}

export interface Model {
  readonly id: string
  readonly name: string
  readonly context_length: number | null
  readonly pricing: { readonly prompt: string; readonly completion: string }
}
