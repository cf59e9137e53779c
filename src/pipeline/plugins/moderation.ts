/** The `moderation` plugin: checks the request with a moderation model before it is sent. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const moderationPlugin = notAvailable("moderation")
