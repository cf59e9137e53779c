/** The `response-healing` plugin: repairs malformed JSON in the answer (a post-model stage). Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const responseHealingPlugin = notAvailable("response-healing")
