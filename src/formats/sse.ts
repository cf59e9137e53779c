/**
 * Server-sent event framing of the Responses stream (wire-compat.md): `event: <type>\ndata: <json>\n\n`,
 * comment lines as keep-alives, and the `data: [DONE]` sentinel. Plain string functions: they run per chunk.
 */

/** The end sentinel, after `response.completed` or `response.failed`. */
export const DONE = "data: [DONE]\n\n"

/** A comment line; clients ignore it. Keeps idle connections open through proxies. */
export const KEEP_ALIVE = ": keep-alive\n\n"

/**
 * Keep-alive comments for a stream that may go quiet (waiting for a first token, a server tool
 * running): `beat` runs every `ms / 2` (10 ms at least) and writes `KEEP_ALIVE` when
 * `keepAliveDue`. The caller clears the timer (`clearInterval`) when the stream ends. `beat` is the
 * stream's one closure for it (a helper that held the stream's state would cost an allocation per stream).
 */
export const startKeepAlive = (ms: number, beat: () => void): ReturnType<typeof setInterval> => setInterval(beat, Math.max(10, Math.floor(ms / 2)))

/** Whether a stream that last wrote at `lastWrite` (ms) has been quiet for `ms`: time for a comment. */
export const keepAliveDue = (lastWrite: number, ms: number): boolean => Date.now() - lastWrite >= ms

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
