/** The `pareto-router` plugin: picks the model on the cost/quality Pareto front. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const paretoRouterPlugin = notAvailable("pareto-router")
