/**
 * A format decoder's request with its `plugins` decoded by the plugins' Schemas, as the stages do
 * right after the decoder (src/pipeline/pre-model.ts): the domain leaves each entry to its plugin.
 */
import { Either } from "effect"
import { testSettings } from "../../src/config/Config.js"
import { BadRequest } from "../../src/domain/errors.js"
import type { ResponsesRequest } from "../../src/domain/responses.js"
import { pluginSetOf } from "../../src/pipeline/plugins/index.js"

const plugins = pluginSetOf({ settings: testSettings() })

export const withPluginsDecoded = <E>(decoded: Either.Either<ResponsesRequest, E>): Either.Either<ResponsesRequest, E | BadRequest> =>
  Either.flatMap(decoded, (request) => {
    const out = plugins.decode(request)
    return out instanceof BadRequest ? Either.left(out) : Either.right(out)
  })
