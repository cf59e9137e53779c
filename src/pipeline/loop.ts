/**
 * The server-tool loop (docs/server-tools.md): a request that declares server tools (src/tools/declare.ts)
 * runs turns until the model answers. Each turn offers the server tools as function tools; when
 * the model calls one, the loop runs it (`ServerTool.run`), appends the call and its output to the
 * conversation and calls the model again. A call to one of the client's own function tools ends
 * the loop and goes back as today. The budget: `max_tool_calls` server-tool calls (30 at most),
 * `stop_server_tools_when`, `server.max_upstream_calls` model calls, and the key's limit (each
 * later turn holds its worst case before it runs); when it ends, one last turn runs with
 * `tool_choice: "none"` so the answer ends in text.
 *
 * One encoder for the whole loop: one response id, `output_index` continuing across turns, each
 * server-tool call its own output item, added before the tool runs and done after it, with the
 * tool's progress events between as they happen (formats without such items show only the text).
 * A streamed loop sends keep-alive comments whenever it was quiet for `streamKeepAliveMs`. Only
 * requests with server tools come here (route.ts: one check); the relay is plain code over the
 * turn's batches, not the optimized single-turn relay of egress.ts.
 */
import { KEEP_ALIVE, keepAliveDue, startKeepAlive } from "../formats/sse.js"
import { apiErrorOf, asProviderError } from "./upstream-errors.js"
import { after } from "./egress.js"
import { errorResponseIn, notRecorded, storeFailureEvent } from "../formats/format.js"
import { type Ending, type LoopDeps, type LoopRequest, LoopRun } from "./loop-run.js"

/** The default of `server.max_upstream_calls`: model calls one request may make in all. */
export const DEFAULT_MAX_UPSTREAM_CALLS = 64

export type { LoopDeps, LoopRequest } from "./loop-run.js"

export const makeToolLoop = (deps: LoopDeps) => {
  const maxUpstreamCalls = deps.settings.catalog.server?.max_upstream_calls ?? DEFAULT_MAX_UPSTREAM_CALLS

  const respond = async (r: LoopRequest): Promise<Response> => {
    const { format, life, plan, streaming, upstreamAbort, attempts, trace, idHeader, cleanup } = r
    const run = new LoopRun(r, deps, maxUpstreamCalls)
    const prepared = run.prepared

    // The first turn: failover before the first byte, refusals in the format's envelope, as today.
    const firstRequest = run.turnRequest(false)
    const first = await deps.runTurn(firstRequest, plan, {
      streaming,
      upstreamAbort,
      trace,
      startedAt: life.startedAt,
      attempts,
      // A failover candidate's compressed prompt (context-compression), with the server tools offered as functions.
      fitFor: prepared.fitFor === undefined ? undefined : (e) => run.withTools(prepared.fitFor?.(e)),
    })
    if (first.refused !== undefined) {
      cleanup()
      run.detach()
      deps.finish(life, streaming, first.outcome)
      return errorResponseIn(format, first.refused, idHeader)
    }
    const encoder = format.encoder(run.request, {
      stream: streaming,
      model: first.endpoint.modelId,
      provider: first.endpoint.provider.id,
      annotations: prepared.annotations,
      formatState: prepared.formatState,
    })
    if (prepared.citable !== undefined) encoder.cite?.(prepared.citable)
    run.begin(first, encoder)
    if (streaming) return streamAnswer(run, () => run.drive(first, firstRequest), deps)

    const ending = await run.drive(first, firstRequest)
    if (ending.kind === "answer") {
      encoder.finish(run.finishExtras(ending.incompleteReason))
      const committed = run.end(run.finishedStatus())
      const headers = { "content-type": "application/json", ...idHeader }
      const response = new Response(JSON.stringify(encoder.result()), { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
      return after(committed, response, format, idHeader)
    }
    if (ending.kind === "refused") {
      run.end("failed", ending.turn.outcome.error)
      return errorResponseIn(format, ending.turn.refused, idHeader)
    }
    const failed = run.failure(ending.cause)
    run.end(failed.status, failed.error)
    return errorResponseIn(format, failed.api ?? apiErrorOf(asProviderError(ending.cause), run.endpoint.provider.id), idHeader)
  }

  return { respond } as const
}

export type ToolLoop = ReturnType<typeof makeToolLoop>

/**
 * A streamed loop's answer: the first byte goes out now, and from here a failure is the format's
 * failure event. Comments keep the stream open through proxies while a tool runs or a later turn
 * has not begun. `drive` runs the loop (`LoopRun.drive`): started once `start` below has bound
 * `run.write` and written the answer's start.
 */
const streamAnswer = (run: LoopRun, drive: () => Promise<Ending>, deps: LoopDeps): Response => {
  const { format, upstreamAbort, trace, idHeader } = run.r
  const { lifecycle } = deps
  const keepAliveMs = deps.settings.streamKeepAliveMs
  const encoder = run.encoder
  const utf8 = new TextEncoder()
  let cut: () => void = () => undefined
  let lastWrite = Date.now()
  let keepAlive: ReturnType<typeof setInterval> | undefined
  const body = new ReadableStream<Uint8Array>({
    start(controller) {
      run.write = (text) => {
        if (text.length === 0) return
        lastWrite = Date.now()
        try {
          controller.enqueue(typeof text === "string" ? utf8.encode(text) : text.slice())
        } catch {
          // The client went away: the loop sees the abort.
        }
      }
      cut = () => {
        run.shuttingDown = true
        upstreamAbort.abort(new Error("server shutting down"))
      }
      lifecycle.openStream(cut)
      run.write(encoder.start())
      keepAlive = startKeepAlive(keepAliveMs, () => {
        if (keepAliveDue(lastWrite, keepAliveMs)) run.write(KEEP_ALIVE)
      })
      const close = (committed: Promise<boolean> | undefined, last: string, status: string) => {
        clearInterval(keepAlive)
        void (committed ?? Promise.resolve(true)).then((kept) => {
          // Durable answers: a record that could not be kept ends the stream in the format's failure event.
          run.write(kept ? last : storeFailureEvent(format, notRecorded()))
          try {
            controller.close()
          } catch {
            // Closed already (the client went away).
          }
          lifecycle.closeStream(cut)
          trace?.endStream(status)
        })
      }
      void drive().then(
        (ending) => {
          if (ending.kind === "answer") {
            const last = encoder.finish(run.finishExtras(ending.incompleteReason))
            const status = run.finishedStatus()
            return close(run.end(status), last, status)
          }
          if (ending.kind === "refused") {
            const error = ending.turn.outcome.error
            const last = encoder.fail({ code: "server_error", message: ending.turn.refused.message }, run.finishExtras())
            return close(run.end("failed", error), last, "failed")
          }
          const failed = run.failure(ending.cause)
          const last = failed.event === undefined ? "" : encoder.fail(failed.event, run.finishExtras())
          return close(run.end(failed.status, failed.error), last, failed.status)
        },
        (e: unknown) => {
          const last = encoder.fail({ code: "server_error", message: "Internal server error" }, run.finishExtras())
          close(run.end("failed", { message: e instanceof Error ? e.message : "the loop failed", status: 500 }), last, "failed")
        },
      )
    },
    cancel() {
      // The client went away: stop the turn or tool in flight; the loop settles what was spent.
      clearInterval(keepAlive)
      upstreamAbort.abort(new Error("client disconnected"))
    },
  })
  if (trace !== undefined) trace.streaming = true
  const headers = { "content-type": "text/event-stream", "cache-control": "no-cache", "x-accel-buffering": "no", ...idHeader }
  return new Response(body, { status: 200, headers: trace === undefined ? headers : trace.head(headers) })
}
