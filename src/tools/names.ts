/**
 * How a request names a server tool in `tools[]` (docs/server-tools.md): `openrouter:<name>`, the contract's
 * `service:<name>`, the gateway's `gateway:<name>`, and OpenAI's `web_search` / `web_search_preview`.
 * No imports: the client formats' decoders read it.
 */
const PREFIXES = ["openrouter:", "service:", "gateway:"] as const

/** A `tools[]` type → the server tool type it names (`openrouter:<name>`), or undefined when it names none. */
export const serverToolTypeOf = (type: unknown): string | undefined => {
  if (typeof type !== "string") return undefined
  if (type === "web_search" || type === "web_search_preview") return "openrouter:web_search"
  for (const prefix of PREFIXES) if (type.startsWith(prefix)) return `openrouter:${type.slice(prefix.length)}`
  return undefined
}


/** Whether `name` (as a workspace lists it: `web_search`, `openrouter:web_search`, `service:…`) names `tool`. */
export const namesTool = (name: string, tool: { readonly name: string; readonly type: string }): boolean =>
  name === tool.name || serverToolTypeOf(name) === tool.type
