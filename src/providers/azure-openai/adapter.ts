/**
 * The Azure OpenAI provider: an `api_version` of a date calls a deployment
 * (`{base_url}/openai/deployments/{deployment}/chat/completions?api-version=…`); none, `v1` or
 * `preview` call the v1 paths (`{base_url}/openai/v1/chat/completions`, `…/responses`), which
 * take the deployment as the body's `model`. The deployment is the endpoint's `upstream_model`.
 * Auth is the `api-key` header (`api_key_env`) or a Microsoft Entra ID bearer token
 * (`bearer_token_env`). The wire formats are OpenAI's, so the openai-chat and openai-responses
 * adapters' bodies and readers serve as they are.
 */
import { openUpstreamAt, sharedTransport } from "../http"
import { openAiChatWire } from "../openai-chat/adapter"
import { openAiResponsesWire } from "../openai-responses/adapter"
import { type Provider, type ProviderConfig, ProviderError } from "../types"
import { memoUrl, trimSlash } from "../urls"
import type { WireFormat } from "../wire"

/** The api_version values that mean the v1 paths (`preview` is still sent, as Azure asks for it). */
const V1_VERSIONS: ReadonlySet<string> = new Set(["v1", "preview"])

/** The resource's root: a base_url written with `/openai` or `/openai/v1` at its end is the same resource. */
const resourceRoot = (baseUrl: string): string => trimSlash(baseUrl).replace(/\/openai(\/v1)?$/, "")

/** The URL of an Azure OpenAI operation (`chat/completions`, `responses`, `embeddings`) on a deployment. */
export const azureUrl = (config: ProviderConfig, deployment: string, operation: string): string => {
  const root = resourceRoot(config.base_url ?? "")
  const version = config.api_version
  if (version === undefined || V1_VERSIONS.has(version)) {
    return `${root}/openai/v1/${operation}${version === "preview" ? "?api-version=preview" : ""}`
  }
  const query = `?api-version=${encodeURIComponent(version)}`
  // The dated Responses API is per resource, the deployment named in the body.
  if (operation === "responses") return `${root}/openai/responses${query}`
  return `${root}/openai/deployments/${encodeURIComponent(deployment)}/${operation}${query}`
}

/** The auth header: `api-key`, else the Entra ID bearer token; a missing variable is the gateway's configuration, said plainly. */
export const azureAuth = (config: ProviderConfig, apiKey: string | undefined): Record<string, string> => {
  if (apiKey !== undefined && apiKey !== "") return { "api-key": apiKey }
  const name = config.bearer_token_env
  const token = name === undefined ? undefined : process.env[name]
  if (token !== undefined && token !== "") return { authorization: `Bearer ${token}` }
  const which = name === undefined ? "api_key_env" : "bearer_token_env"
  throw new ProviderError("auth", `azure-openai provider ${config.id}: the variable named by ${which} is not set`)
}

const urls = new WeakMap<ProviderConfig, Map<string, string>>()

const chatWire: WireFormat = { ...openAiChatWire, name: "azure-openai" }
const responsesWire: WireFormat = { ...openAiResponsesWire, name: "azure-openai" }

export const azureOpenAiProvider: Provider = {
  open: (request, config, options) => {
    let auth: Record<string, string>
    try {
      auth = azureAuth(config, options.apiKey)
    } catch (e) {
      return Promise.reject(e)
    }
    const responses = config.api === "responses"
    const operation = responses ? "responses" : "chat/completions"
    const url = memoUrl(urls, config, `${operation} ${request.model}`, () => azureUrl(config, request.model, operation))
    return openUpstreamAt(sharedTransport(), responses ? responsesWire : chatWire, request, config, options, url, auth)
  },
}
