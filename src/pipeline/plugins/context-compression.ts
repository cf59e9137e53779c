/** The `context-compression` plugin: compresses a prompt longer than the model's context. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const contextCompressionPlugin = notAvailable("context-compression")
