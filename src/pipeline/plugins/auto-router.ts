/** The `auto-router` plugin: picks the model for the request from allowed_models (cost_quality_tradeoff). Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const autoRouterPlugin = notAvailable("auto-router")
