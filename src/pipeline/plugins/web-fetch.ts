/** The `web-fetch` plugin: fetches the pages a prompt links to. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const webFetchPlugin = notAvailable("web-fetch")
