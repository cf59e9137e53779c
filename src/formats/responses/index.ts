/**
 * The Responses client format (POST /v1/responses): the contract's own request is the normalized
 * request, so ingress is its decoder; egress is `ResponseAssembler`; errors are the contract's
 * envelope `{error: {code, message, metadata?}, user_id}`.
 */
import { envelopeOf } from "../../domain/errors.js"
import { decodeResponsesRequest } from "../../domain/responses.js"
import { ResponseAssembler, resultBaseOf } from "./assembler.js"
import type { ClientFormat } from "../format.js"

export const responsesFormat: ClientFormat = {
  name: "responses",
  decode: decodeResponsesRequest,
  slicedItems: { key: "input" },
  // The caller's own body (not the decoded request, whose defaults would hide the preset's values).
  ownFields: (body) => body as Record<string, unknown>,
  encoder: (request, options) => new ResponseAssembler(resultBaseOf(request, { model: options.model }), { stream: options.stream, annotations: options.annotations }),
  errorBody: (e) => JSON.stringify(envelopeOf(e)),
}
