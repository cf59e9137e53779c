/** The `web` plugin: adds web search results to the prompt. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const webPlugin = notAvailable("web")
