/**
 * Server-sent event framing of the Responses stream (wire-compat.md): `event: <type>\ndata: <json>\n\n`,
 * comment lines as keep-alives, and the `data: [DONE]` sentinel. Plain string functions: they run per chunk.
 */

/** The end sentinel, after `response.completed` or `response.failed`. */
export const DONE = "data: [DONE]\n\n"

/** A comment line; clients ignore it. Keeps idle connections open through proxies. */
export const KEEP_ALIVE = ": keep-alive\n\n"

/** One event whose payload is already JSON text (an object that holds its own `type`). */
export const sseFrame = (type: string, json: string): string => `event: ${type}\ndata: ${json}\n\n`

/** One event from a payload object. */
export const sseEvent = (type: string, payload: object): string => sseFrame(type, JSON.stringify(payload))

/**
 * The debug chunk of `debug.echo_upstream_body`: the first chunk of the stream, before
 * `response.created`. It carries no `sequence_number` (it is not a Responses event; strict clients
 * accept it only because it is asked for), so the Responses events still number from 0.
 */
export const debugChunk = (upstreamBody: unknown): string =>
  sseFrame("debug", JSON.stringify({ type: "debug", debug: { echo_upstream_body: upstreamBody } }))
