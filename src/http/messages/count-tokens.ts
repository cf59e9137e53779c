/**
 * POST /v1/messages/count_tokens: `{input_tokens}` for a Messages body, authenticated like the
 * data plane (`x-api-key` or `Authorization: Bearer`), errors in Anthropic's envelope. A preset
 * named by `model` (`@preset/slug`) adds its system prompt, as it would to the request.
 */
import { Context, Effect, Either, Option, Runtime } from "effect"
import type { Settings } from "../../config/Config.js"
import { type ApiError, BadRequest } from "../../domain/errors.js"
import { countInputTokens } from "../../formats/messages/count-tokens.js"
import { messagesFormat } from "../../formats/messages/index.js"
import { decodeCountTokensRequest } from "../../formats/messages/request.js"
import { decodePlugins } from "../../pipeline/plugins/index.js"
import { errorResponseIn } from "../../formats/format.js"
import { applyPreset, presetSlugOf } from "../../routing/presets.js"
import { Auth, requestSecret } from "../../services/Auth.js"
import { PresetStore } from "../../services/PresetStore.js"
import { BODY_TIMED_OUT, bodyTimedOut, makeBodyDeadline, readCappedText, tooManyUnfinished, type UnfinishedBodies } from "../../pipeline/body.js"
import { itemLimitOf, parseJson } from "../../pipeline/ingress.js"

const CLOSE = { connection: "close" }

export const makeCountTokensRoute = (runtime: Runtime.Runtime<Auth | PresetStore>, settings: Settings, bodies?: UnfinishedBodies) => {
  const auth = Context.get(runtime.context, Auth)
  const presets = Context.get(runtime.context, PresetStore)
  const bodyDeadline = makeBodyDeadline(settings.bodyTimeoutMs, settings.maxBodyBytes)
  const parts = { maxTokensPerImage: settings.maxTokensPerImage, maxTokensPerFile: settings.maxTokensPerFile }
  const run = Runtime.runPromise(runtime)
  const refuse = (e: ApiError, headers: Record<string, string> = {}) => errorResponseIn(messagesFormat, e, headers)

  /** The count, or the refusal: after the key, the body is decoded as POST /v1/messages decodes it (max_tokens not required). */
  const count = (userId: string, bodyText: string) =>
    Effect.gen(function* () {
      const json = parseJson(bodyText)
      if (Either.isLeft(json)) return yield* json.left
      const tooMany = itemLimitOf(json.right)
      if (tooMany !== undefined) return yield* tooMany
      const decoded = yield* decodeCountTokensRequest(json.right)
      // Its plugins are refused as the model route refuses them (each entry by its plugin's Schema).
      if (decoded.plugins !== undefined) yield* decodePlugins(decoded.plugins)
      const slug = presetSlugOf(decoded)
      if (slug instanceof BadRequest) return yield* slug
      let request = decoded
      let extraText = ""
      if (slug !== undefined) {
        const found = Option.getOrUndefined(yield* presets.resolve(userId, slug))
        const applied = yield* applyPreset(decoded as unknown as Record<string, unknown>, decoded, slug, found)
        request = applied.request
        // The preset's system prompt is text the body did not carry.
        if (decoded.instructions === undefined) extraText = request.instructions ?? ""
      }
      return countInputTokens(bodyText, request, extraText, parts)
    })

  return async (req: Request): Promise<Response> => {
    const principal = await run(Effect.either(auth.authenticateSecret(requestSecret(req.headers))))
    if (Either.isLeft(principal)) return refuse(principal.left, CLOSE)
    const slot = bodies?.enter(principal.right.hash, req)
    if (typeof slot === "string") return refuse(tooManyUnfinished(slot, bodies as UnfinishedBodies), CLOSE)
    const read = readCappedText(req, settings.maxBodyBytes)
    if (!(read instanceof Promise)) {
      if (slot !== undefined) bodies?.leave(slot)
      return refuse(read, CLOSE)
    }
    const arriving = bodyDeadline(read, req.headers.get("content-length"))
    const bodyText = await (slot === undefined ? arriving : arriving.finally(() => bodies?.leave(slot)))
    if (bodyText === BODY_TIMED_OUT) return refuse(bodyTimedOut(settings.bodyTimeoutMs), CLOSE)
    if (typeof bodyText !== "string") return refuse(bodyText, CLOSE)
    const counted = await run(Effect.either(count(principal.right.userId, bodyText)))
    if (Either.isLeft(counted)) return refuse(counted.left)
    return new Response(JSON.stringify({ input_tokens: counted.right }), { headers: { "content-type": "application/json" } })
  }
}
