/**
 * Egress: the format's encoder turns the turn's normalized events into the answer, a JSON body
 * or an SSE stream, and the answer's end finishes the request (finish.ts). The per-chunk relay is
 * plain code on Bun's direct stream (an Effect Stream step costs 15-20 µs per chunk);
 * its code was moved here from the Responses route as it was.
 */
import type { ResponsesRequest } from "../domain/responses.js"
import { consumeEvents } from "../providers/consume.js"
import type { PlainAbort } from "../providers/abort.js"
import { type ProviderEvent, ProviderError, type Subscription, type UpstreamCall } from "../providers/types.js"
import type { RoutePlan, Router } from "../routing/Router.js"
import type { Endpoint } from "../services/Catalog.js"
import { errorResponseIn, type ClientFormat, type Encoder, type FinishExtras, notRecorded, storeFailureEvent } from "../formats/format.js"
import { debugChunk, KEEP_ALIVE, keepAliveDue, startKeepAlive } from "../formats/sse.js"
import { streamGcPacer } from "./gc-pacer.js"
import type { Deadline, Deadlines } from "../deadlines.js"
import { apiErrorOf, asProviderError, failureCodeOf } from "./upstream-errors.js"
import type { RequestTrace } from "./trace.js"
import { RequestTimeout } from "../domain/errors.js"
import type { Finish, Outcome, RequestLife } from "./finish.js"
import type { RequestLifecycle } from "./lifecycle.js"
import type { PostModelRun } from "./stages.js"
import { clientClosedResponse, DeadlineExceeded, statusOfFailure } from "./turns.js"

/** Upstream events translated per write to a stream: ~11 KB of text deltas (~235 bytes each), under the sink's 16 KB. */
const EVENTS_PER_WRITE = 48
/**
 * About the most bytes translated per write: a piece is cut at this many bytes of deltas as well
 * as at `EVENTS_PER_WRITE` events, so a write that finds the client's socket full is followed by
 * nothing more (long deltas made one piece of up to a whole upstream read: 500 never-reading
 * streams of 4 KB deltas gave the sink ~46 KB each past the write that waited, and kept its text).
 */
const BYTES_PER_WRITE = 12 * 1024
/** Bun's ReadableStream takes a direct source (and a strategy); the DOM typings in scope do not know that overload. */
const DirectStream = ReadableStream as unknown as new (
  source: Bun.DirectUnderlyingSource<string>,
  strategy: { readonly highWaterMark: number },
) => ReadableStream<Uint8Array>
/**
 * The response sink's high-water mark: without one, Bun's sink queued ~125 KB more of an answer
 * whose client reads nothing before a write waited; with 16 KB, ~4 KB (100 such streams, Bun
 * 1.4.5; 2 and 8 KB behaved as none).
 */
const SINK_STRATEGY = { highWaterMark: 16 * 1024 }

type TextLiterals = Extract<ProviderEvent, { readonly type: "text_literals" }>

/** The bytes of upstream text an event brings (its SSE is about as long); 0 for the others. */
const deltaBytes = (event: ProviderEvent): number => {
  switch (event.type) {
    case "text_literals":
      return event.spans.length === 0 ? 0 : (event.spans[event.spans.length - 1] as number) - (event.spans[0] as number)
    case "text":
    case "reasoning":
    case "tool_call_delta":
      return event.delta.length
    default:
      return 0
  }
}

/** More deltas than one write takes: translated in pieces (`translateLiteral`). */
const isLongLiteral = (event: TextLiterals): boolean => event.spans.length > 2 * EVENTS_PER_WRITE || deltaBytes(event) > BYTES_PER_WRITE

/**
 * The upstream's answer ends in these events (they hold its finish): they are translated in one
 * write. Bun's sink sends a write that takes it past its mark at once, with what it holds, so a
 * 200-delta answer that came in one read (~47 KB) leaves in two sends, not three (`strace -c`).
 * What a client that reads nothing can leave in the sink is bounded by one upstream read (its
 * receive buffer is fixed, src/providers/socket-buffers.ts), once, at the answer's end; a long
 * answer is paused in pieces long before it.
 */
const endsAnswer = (events: ReadonlyArray<ProviderEvent>): boolean => {
  for (let i = events.length - 1; i >= 0; i--) if ((events[i] as ProviderEvent).type === "finish") return true
  return false
}

/**
 * A literal that is its own copy (made by `restOfLiteral`): its deltas fill its source. One in an
 * upstream read never starts at 0, as its event's `data: {` comes before it in the same read.
 */
const isOwnCopy = (event: TextLiterals): boolean => event.spans[0] === 0 && event.spans[event.spans.length - 1] === event.source.length

/**
 * The deltas of `event` from span `at` on, copied out of their read, which is then not kept (Bun
 * hands a read over as a Buffer, whose `slice` is a view: it kept the whole read alive).
 */
export const restOfLiteral = (event: TextLiterals, at: number): TextLiterals => {
  const spans = event.spans
  const base = spans[at] as number
  const rest = new Array<number>(spans.length - at)
  for (let i = at; i < spans.length; i++) rest[i - at] = (spans[i] as number) - base
  return { type: "text_literals", source: Uint8Array.prototype.slice.call(event.source, base, spans[spans.length - 1] as number), spans: rest }
}

/** `events` from `from` on, to be held: their literals copied out of the upstream read (see `restOfLiteral`). */
export const detached = (events: ReadonlyArray<ProviderEvent>, from: number): ReadonlyArray<ProviderEvent> => {
  const out = events.slice(from)
  for (let i = 0; i < out.length; i++) {
    const event = out[i] as ProviderEvent
    if (event.type === "text_literals" && event.spans.length > 0 && !isOwnCopy(event)) out[i] = restOfLiteral(event, 0)
  }
  return out
}

/**
 * The answer, once `committed` (finish's promise with durable answers) has resolved: when its record
 * could not be kept, a 503 in the format's envelope instead.
 */
export const after = (
  committed: Promise<boolean> | undefined,
  response: Response,
  format: ClientFormat,
  idHeader: Record<string, string>,
): Response | Promise<Response> =>
  committed === undefined ? response : committed.then((kept) => (kept ? response : errorResponseIn(format, notRecorded(), idHeader)))

/** One request's answer: the turn that answered and what its end reads. */
export interface Answering {
  readonly format: ClientFormat
  readonly life: RequestLife
  readonly request: ResponsesRequest
  readonly plan: RoutePlan
  readonly chosen: Endpoint
  readonly call: UpstreamCall
  readonly assembler: Encoder
  readonly attemptStartedAt: number
  readonly upstreamAbort: PlainAbort
  /** Clears the request's deadline and its client-abort handler. */
  readonly cleanup: () => void
  /** The usage, cost and metadata the answer ends with. */
  readonly finishExtras: () => FinishExtras
  readonly idHeader: Record<string, string>
  readonly trace: RequestTrace | undefined
  /** The post-model stages over the events (undefined: none applies). */
  readonly post: PostModelRun | undefined
  /** Set by a stream's relay: the deadline must end a stream that waits on its client (no upstream read comes to end it). */
  cutOnDeadline: (() => void) | undefined
}

export interface EgressDeps {
  readonly router: Router
  readonly lifecycle: RequestLifecycle
  readonly finish: Finish
  /** A stream whose client has read nothing for this long is cut. */
  readonly stalls: Deadlines
  readonly durable: boolean
  readonly keepAliveMs: number
  readonly deadlineMessage: string
  readonly stallMessage: string
  readonly shutdownMessage: string
}

// long: its length is `stream`'s, the measured relay inside it (see there)
export const makeEgress = (deps: EgressDeps) => {
  const { router, lifecycle, finish, stalls, durable, keepAliveMs, deadlineMessage, stallMessage, shutdownMessage } = deps

  /** The whole answer read, then one JSON body in the format. */
  const json = async (answering: Answering): Promise<Response> => {
    const { format, life, plan, chosen, call, assembler, attemptStartedAt, upstreamAbort, cleanup, finishExtras, idHeader, trace, post } = answering
    const generationId = life.generationId
    let firstTokenAt: number | undefined
    try {
      if (call.whole !== undefined) {
        // Read whole already: no iteration, no promise.
        firstTokenAt = Date.now()
        trace?.markFirstToken()
        assembler.push(post === undefined ? call.whole : post(call.whole))
      } else {
        for await (const batch of call.events) {
          if (firstTokenAt === undefined) {
            firstTokenAt = Date.now()
            trace?.markFirstToken()
          }
          assembler.push(post === undefined ? batch : post(batch))
        }
      }
    } catch (e) {
      cleanup()
      const error = asProviderError(e)
      const cancelled = upstreamAbort.signal.aborted
      if (!cancelled) router.recordFailure(chosen, error.kind)
      finish(life, false, {
        endpoint: chosen,
        assembler,
        status: cancelled ? "cancelled" : "failed",
        error: { message: error.message, status: statusOfFailure(error) },
        firstTokenAt,
      })
      if (upstreamAbort.signal.reason instanceof DeadlineExceeded) {
        return errorResponseIn(format, new RequestTimeout({ message: deadlineMessage }), idHeader)
      }
      if (cancelled) return clientClosedResponse()
      return errorResponseIn(format, apiErrorOf(error, chosen.provider.id), idHeader)
    }
    cleanup()
    assembler.finish(finishExtras())
    if (assembler.status === "failed") {
      // The upstream ended with an error of its own (finish reason "error"): no answer to give.
      router.recordFailure(chosen, "server")
      finish(life, false, {
        endpoint: chosen,
        assembler,
        status: "failed",
        error: { message: `Provider ${chosen.provider.id} ended the answer with an error`, status: 502 },
        firstTokenAt,
      })
      return errorResponseIn(format, apiErrorOf(new ProviderError("server", "the answer ended with an error"), chosen.provider.id), idHeader)
    }
    router.recordSuccess(plan, chosen, {
      ttftMs: firstTokenAt === undefined ? undefined : firstTokenAt - attemptStartedAt,
      outputTokens: assembler.usage?.outputTokens ?? 0,
      generationMs: Date.now() - attemptStartedAt,
    })
    const committed = finish(life, false, {
      endpoint: chosen,
      assembler,
      status: assembler.status === "incomplete" ? "incomplete" : "completed",
      firstTokenAt,
    })
    const json = JSON.stringify(assembler.result())
    // A literal, not spreads of the shared header objects (a builtin call each, per answer).
    const headers = { "content-type": "application/json", "x-generation-id": generationId }
    return after(committed, new Response(json, { status: 200, headers: trace === undefined ? headers : trace.head(headers, json.length) }), format, idHeader)
  }

  /** Streaming: the first byte goes out now; from here a failure is the format's failure event, never a fallback. */
  // long: the measured relay: one stream's state is this closure's locals, shared by `pull` and the upstream's read callback with no object or promise per event (bench/NOTES.md, "No promise per relayed event")
  const stream = (answering: Answering): Response => {
    const { life, request, plan, chosen, call, assembler, attemptStartedAt, upstreamAbort, cleanup, finishExtras, trace, post } = answering
    const generationId = life.generationId
    const upstreamBody = call.upstreamBody
    let firstTokenAt: number | undefined
    let done = false
    let lastWrite = Date.now()
    let keepAlive: ReturnType<typeof setInterval> | undefined
    let subscription: Subscription | undefined
    let stall: Deadline | undefined
    const end = (status: Outcome["status"], error?: Outcome["error"]): Promise<boolean> | undefined => {
      if (done) return undefined
      done = true
      streamGcPacer.closed()
      if (keepAlive !== undefined) clearInterval(keepAlive)
      if (stall !== undefined) stalls.remove(stall)
      lifecycle.closeStream(cutForShutdown)
      cleanup()
      const committed = finish(life, true, { endpoint: chosen, assembler, status, error, firstTokenAt })
      trace?.endStream(status)
      return committed
    }
    let cutForShutdown: () => void = () => undefined
    // Bun's direct stream: each event string goes straight to the socket's sink, with no queue and
    // no TextEncoder per chunk (a 200-event relay: ~120 µs of CPU instead of ~240 µs, Bun 1.4).
    // Events are pushed to it as each upstream read is translated: no promise per event, so nothing
    // of a waiting stream outlives a young-generation collection (2,000 held streams each kept a
    // promise, its functions and scope per token until the next full collection).
    streamGcPacer.opened()
    const relay: Bun.DirectUnderlyingSource<string> = {
      type: "direct",
      // long: the relay loop on the hot path (per upstream read: backpressure, batched writes, keep-alive, the stall cut), measured as one piece (bench/NOTES.md, "Writes of 48 events")
      pull(controller: ReadableStreamDirectController) {
        let settled: () => void = () => undefined
        const streamed = new Promise<void>((resolve) => {
          settled = resolve
        })
        // Backpressure: a write the client's socket cannot take yet returns a promise (Bun 1.4.5;
        // the sink keeps that chunk). Until it settles, nothing more is translated and the upstream
        // is paused, so a client that reads nothing holds a write or two here, not the whole answer.
        let blocked = false
        let pendingWrite: Promise<number> | undefined
        // Batches read while blocked (what one upstream read held), the first from `heldFrom`; their
        // literals are copies (`detached`), so a held stream keeps what it has not translated, not its reads.
        const held: Array<ReadonlyArray<ProviderEvent>> = []
        let heldFrom = 0
        // The deltas of a long literal event not translated yet (a copy, from span `heldLiteralAt`), before `held`.
        let heldLiteral: TextLiterals | undefined
        let heldLiteralAt = 0
        // The end or failure, once what came before it is written.
        let ending: (() => void) | undefined
        const write = (text: string | Uint8Array) => {
          lastWrite = Date.now()
          const written = controller.write(text)
          if (typeof written !== "number") blockedOn(written)
        }
        const blockedOn = (written: Promise<number>) => {
          pendingWrite = written
          written.then(
            () => {
              if (pendingWrite === written) drained()
            },
            () => undefined,
          )
          if (blocked) return
          blocked = true
          subscription?.pause()
          if (!done) stall = stalls.add(cutStalled)
        }
        const drained = () => {
          pendingWrite = undefined
          blocked = false
          if (stall !== undefined) stalls.remove(stall)
          stall = undefined
          if (done) return
          if (heldLiteral !== undefined) {
            translateLiteral(heldLiteral, heldLiteralAt)
            if (blocked) return
            heldLiteral = undefined
          }
          while (held.length > 0) {
            const events = held[0] as ReadonlyArray<ProviderEvent>
            const stopped = translate(events, heldFrom)
            if (stopped < events.length) {
              heldFrom = stopped
              return
            }
            held.shift()
            heldFrom = 0
          }
          if (blocked) return
          const next = ending
          ending = undefined
          if (next !== undefined) next()
          else subscription?.resume()
        }
        /** Translates and writes `events` from `start`; where it stopped on backpressure, or their length. */
        const translate = (events: ReadonlyArray<ProviderEvent>, start: number): number => {
          if (start === 0 && !blocked && endsAnswer(events)) {
            const text = assembler.push(events, 0, events.length)
            if (text.length > 0) write(text)
            return events.length
          }
          // In pieces of a few KB: Bun's sink sends a write that takes it past its 16 KB mark at
          // once, with what it holds; smaller writes go out together when the turn of the event
          // loop ends. Backpressure is looked at between pieces, so a client that reads nothing is
          // given one piece past its last write.
          for (let from = start; from < events.length; ) {
            if (blocked) return from
            const first = events[from] as ProviderEvent
            if (first.type === "text_literals" && isLongLiteral(first)) {
              translateLiteral(first, 0)
              from++
              continue
            }
            let to = from + 1
            let bytes = deltaBytes(first)
            while (to < events.length && to - from < EVENTS_PER_WRITE) {
              const event = events[to] as ProviderEvent
              if (event.type === "text_literals" && isLongLiteral(event)) break
              bytes += deltaBytes(event)
              if (bytes > BYTES_PER_WRITE) break
              to++
            }
            writeOut(assembler.push(events, from, to))
            from = to
          }
          return events.length
        }
        const writeOut = (text: string | Uint8Array) => {
          if (typeof text === "string") {
            if (text !== "") write(text)
            return
          }
          // The sink copies what it is given: the view can be cut and the writer reused.
          for (let at = 0; at < text.length; at += BYTES_PER_WRITE) write(text.subarray(at, at + BYTES_PER_WRITE))
        }
        /**
         * A whole read's deltas in one event (a fast upstream), in pieces of at most `EVENTS_PER_WRITE`
         * deltas and about `BYTES_PER_WRITE` bytes: a socket that fills stops it part way, and the
         * deltas not yet translated are kept, copied out of the read, not their SSE.
         */
        const translateLiteral = (event: TextLiterals, start: number) => {
          const spans = event.spans
          for (let at = start; at < spans.length; ) {
            if (blocked) {
              if (isOwnCopy(event)) {
                heldLiteral = event
                heldLiteralAt = at
              } else {
                heldLiteral = restOfLiteral(event, at)
                heldLiteralAt = 0
              }
              return
            }
            const limit = (spans[at] as number) + BYTES_PER_WRITE
            let to = at + 2
            while (to < spans.length && to - at < 2 * EVENTS_PER_WRITE && (spans[to + 1] as number) <= limit) to += 2
            writeOut(assembler.push([{ type: "text_literals", source: event.source, spans: spans.slice(at, to) }]))
            at = to
          }
        }
        /** The client read nothing for the stall timeout: cut, recorded cancelled, charged for what was produced. */
        const cutStalled = () => {
          stall = undefined
          if (done) return
          end("cancelled", { message: stallMessage, status: 408 })
          subscription?.stop()
          upstreamAbort.abort(new Error("client stalled"))
          // With an error the connection is closed at once (a reset), not left to flush to a client that does not read.
          controller.close(new Error(stallMessage))
          settled()
        }
        cutForShutdown = () => {
          if (done) return
          const text = assembler.fail({ code: "server_shutting_down", message: shutdownMessage }, finishExtras())
          end("cancelled", { message: shutdownMessage, status: 503 })
          subscription?.stop()
          upstreamAbort.abort(new Error("server shutting down"))
          write(text)
          controller.close()
          settled()
        }
        lifecycle.openStream(cutForShutdown)
        /** Durable answers: the terminal event and [DONE] go out once the record is committed (else the format's failure event). */
        const closeAfter = (committed: Promise<boolean> | undefined, last: string) =>
          void (committed ?? Promise.resolve(true)).then((kept) => {
            try {
              write(kept ? last : storeFailureEvent(answering.format, notRecorded()))
              controller.close()
            } catch {
              // The client went away while the record was committed: nothing to send to.
            }
            settled()
          })
        const debug = request.debug?.echo_upstream_body === true ? (assembler.debugChunk?.(upstreamBody) ?? debugChunk(upstreamBody)) : ""
        write(debug + assembler.start())
        const fail = (e: unknown) => {
          if (done) return settled()
          if (upstreamAbort.signal.aborted && !(upstreamAbort.signal.reason instanceof DeadlineExceeded)) {
            end("cancelled")
            controller.close()
            return settled()
          }
          const error = asProviderError(e)
          const deadlineHit = upstreamAbort.signal.reason instanceof DeadlineExceeded
          if (!deadlineHit) router.recordFailure(chosen, error.kind)
          const message = deadlineHit ? deadlineMessage : `Provider ${chosen.provider.id} failed mid-stream: ${error.message}`
          const last = assembler.fail({ code: deadlineHit ? "timeout" : failureCodeOf(error), message }, finishExtras())
          if (!durable) write(last)
          const committed = end("failed", { message, status: deadlineHit ? 408 : statusOfFailure(error) })
          if (durable) return closeAfter(committed, last)
          controller.close()
          settled()
        }
        answering.cutOnDeadline = () => {
          if (blocked || held.length > 0 || heldLiteral !== undefined) fail(new DeadlineExceeded())
        }
        const finishStream = () => {
          const last = assembler.finish(finishExtras())
          if (!durable) write(last)
          let committed: Promise<boolean> | undefined
          if (assembler.status === "failed") {
            // The upstream ended with an error of its own: the client got response.failed.
            router.recordFailure(chosen, "server")
            committed = end("failed", { message: `Provider ${chosen.provider.id} ended the answer with an error`, status: 502 })
          } else {
            router.recordSuccess(plan, chosen, {
              ttftMs: firstTokenAt === undefined ? undefined : firstTokenAt - attemptStartedAt,
              outputTokens: assembler.usage?.outputTokens ?? 0,
              generationMs: firstTokenAt === undefined ? undefined : Date.now() - firstTokenAt,
            })
            committed = end(assembler.status === "incomplete" ? "incomplete" : "completed")
          }
          if (durable) return closeAfter(committed, last)
          controller.close()
          settled()
        }
        subscription = consumeEvents(call, {
          batch(upstreamEvents) {
            if (done) return
            const events = post === undefined ? upstreamEvents : post(upstreamEvents)
            if (firstTokenAt === undefined) {
              firstTokenAt = Date.now()
              trace?.markFirstToken()
            }
            if (held.length > 0 || heldLiteral !== undefined) return void held.push(detached(events, 0))
            const stopped = translate(events, 0)
            if (stopped < events.length) {
              held.push(detached(events, stopped))
              heldFrom = 0
            }
          },
          end() {
            if (done) return settled()
            if (blocked || held.length > 0 || heldLiteral !== undefined) ending = finishStream
            else finishStream()
          },
          error(e) {
            // Our own abort ends the stream now; an upstream failure comes after what was read before it.
            if (done || upstreamAbort.signal.aborted || !(blocked || held.length > 0 || heldLiteral !== undefined)) fail(e)
            else ending = () => fail(e)
          },
        })
        // The start was written before the subscription: it may have found the socket full.
        if (blocked) subscription.pause()
        // Comments keep an idle connection open until the first token. Set once the events already
        // read are translated: an answer that came whole with its head ends above, with no timer.
        if (!done && firstTokenAt === undefined) {
          keepAlive = startKeepAlive(keepAliveMs, () => {
            if (done || firstTokenAt !== undefined) return clearInterval(keepAlive)
            if (!blocked && keepAliveDue(lastWrite, keepAliveMs)) write(KEEP_ALIVE)
          })
        }
        return streamed
      },
      cancel() {
        // The client went away: stop the upstream at once and record what was used.
        upstreamAbort.abort(new Error("client disconnected"))
        subscription?.stop()
        end("cancelled")
      },
    }
    const body = new DirectStream(relay, SINK_STRATEGY)
    if (trace !== undefined) trace.streaming = true
    const headers = {
      "content-type": "text/event-stream",
      "cache-control": "no-cache",
      "x-accel-buffering": "no",
      "x-generation-id": generationId,
    }
    return new Response(body, { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
  }

  return { json, stream } as const
}
