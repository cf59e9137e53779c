/**
 * Which settings each provider kind needs and takes, checked at start: the message names the
 * entry, the setting and the kind (`providers[2].project: is required for kind "vertex"`).
 * A setting of another kind is refused too, so a misplaced key is not silently ignored.
 */
import type { ProviderKind } from "../providers/kinds.js"

/** The entry's fields this check reads (a `ProviderEntry`). */
interface ProviderSettings {
  readonly kind: ProviderKind
  readonly base_url?: string | undefined
  readonly api_key_env?: string | undefined
  readonly project?: string | undefined
  readonly location?: string | undefined
  readonly credentials_file?: string | undefined
  readonly token_url?: string | undefined
  readonly api_version?: string | undefined
  readonly bearer_token_env?: string | undefined
  readonly api?: string | undefined
}

type Setting = Exclude<keyof ProviderSettings, "kind">

/** Settings only some kinds take, and which. */
const ONLY_FOR: Partial<Record<Setting, ReadonlyArray<ProviderKind>>> = {
  project: ["vertex"],
  location: ["vertex"],
  credentials_file: ["vertex"],
  token_url: ["vertex"],
  api_version: ["azure-openai"],
  bearer_token_env: ["azure-openai"],
  api: ["azure-openai"],
}

/** Settings a kind cannot do without (base_url: where the kind has no default host). */
const REQUIRED: Partial<Record<ProviderKind, ReadonlyArray<Setting>>> = {
  "openai-chat": ["base_url"],
  "openai-responses": ["base_url"],
  anthropic: ["base_url"],
  gemini: ["api_key_env"],
  vertex: ["project", "location"],
  "azure-openai": ["base_url"],
}

const isUrl = (value: string): boolean => URL.canParse(value) && /^https?:/.test(value)

export const providerSettingsProblem = (p: ProviderSettings, i: number): string | undefined => {
  const at = `providers[${i}]`
  for (const setting of REQUIRED[p.kind] ?? []) {
    if (p[setting] === undefined) return `${at}.${setting}: is required for kind "${p.kind}"`
  }
  for (const [setting, kinds] of Object.entries(ONLY_FOR) as Array<[Setting, ReadonlyArray<ProviderKind>]>) {
    if (p[setting] !== undefined && !kinds.includes(p.kind)) return `${at}.${setting}: only applies to kind ${kinds.map((k) => `"${k}"`).join(", ")}`
  }
  if (p.kind === "vertex" && p.api_key_env !== undefined) return `${at}.api_key_env: kind "vertex" takes a service account (credentials_file), not a key`
  if (p.base_url !== undefined && !isUrl(p.base_url)) return `${at}.base_url: must be an http(s) URL`
  if (p.token_url !== undefined && !isUrl(p.token_url)) return `${at}.token_url: must be an http(s) URL`
  if (p.location !== undefined && !/^[a-z0-9-]+$/.test(p.location)) return `${at}.location: must be "global" or a region such as us-central1`
  if (p.kind === "azure-openai") {
    if (p.api_key_env === undefined && p.bearer_token_env === undefined) return `${at}.api_key_env: is required for kind "azure-openai" (or bearer_token_env)`
    if (p.api_key_env !== undefined && p.bearer_token_env !== undefined) return `${at}.bearer_token_env: set api_key_env or bearer_token_env, not both`
  }
  return undefined
}
