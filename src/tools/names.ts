/**
 * How a request names a server tool in `tools[]` (docs/server-tools.md): `openrouter:<name>`, the contract's
 * `service:<name>`, the gateway's `gateway:<name>`, and a tool's own `aliases` (OpenAI's `web_search` /
 * `web_search_preview` for web search). No imports: the registry (index.ts) and fusion's panel, which
 * the registry imports, each build their lookup from their own tools.
 */
const PREFIXES = ["openrouter:", "service:", "gateway:"] as const

/** What the names of a tool are made of. */
interface Named {
  readonly type: string
  readonly name: string
  readonly aliases?: ReadonlyArray<string>
}

/** A prefixed `tools[]` type → the server tool type it names (`openrouter:<name>`), or undefined. */
const prefixedTypeOf = (type: string): string | undefined => {
  for (const prefix of PREFIXES) if (type.startsWith(prefix)) return `openrouter:${type.slice(prefix.length)}`
  return undefined
}

/**
 * The lookup `tools[]` type → the server tool type it names (`openrouter:<name>`), or undefined when it
 * names none, over `tools`' aliases; built once, when the module that owns the tools loads.
 */
export const toolTypeLookup = (tools: ReadonlyArray<Named>): ((type: unknown) => string | undefined) => {
  const aliases = new Map<string, string>()
  for (const tool of tools) for (const alias of tool.aliases ?? []) aliases.set(alias, tool.type)
  return (type) => (typeof type !== "string" ? undefined : (aliases.get(type) ?? prefixedTypeOf(type)))
}

/** Whether `name` (as a workspace lists it: `web_search`, `openrouter:web_search`, `service:…`, an alias) names `tool`. */
export const namesTool = (name: string, tool: Named): boolean =>
  name === tool.name || prefixedTypeOf(name) === tool.type || tool.aliases?.includes(name) === true
