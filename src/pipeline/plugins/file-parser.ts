/** The `file-parser` plugin: turns PDF and other file parts into text before the model reads them. Not built on this gateway yet: a request that enables it is refused (400). */
import { notAvailable } from "./plugin.js"

export const fileParserPlugin = notAvailable("file-parser")
