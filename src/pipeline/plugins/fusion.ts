/** The `fusion` plugin: asks several analysis models and fuses their answers (several model turns). Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const fusionPlugin = notAvailable("fusion")
