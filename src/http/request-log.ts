/**
 * The request lines: one JSON line per finished request (its trace, src/pipeline/trace.ts), written
 * by the log writer (src/lib/log.ts) from the server's end of a trace. No body content unless the
 * level is debug.
 */
import { isoTime } from "../domain/time.js"
import type { RequestTrace } from "../pipeline/trace.js"
import { type LogLevelName, logWriter, RANK } from "../lib/log.js"

const round2 = (ms: number) => Math.round(ms * 100) / 100

/** Writes one line per finished request; `undefined` when the level leaves request lines out. */
export const makeRequestLogger = (level: LogLevelName) => {
  const rank = RANK[level]
  if (rank >= RANK.none) return undefined
  const debug = rank === RANK.debug
  return (trace: RequestTrace, status: number, totalMs: number): void => {
    // A request line is info, a server error is an error.
    const lineLevel = status >= 500 ? "error" : "info"
    if (RANK[lineLevel] < rank) return
    const line: Record<string, unknown> = {
      time: isoTime(Date.now()),
      level: lineLevel,
      msg: "request",
      request_id: trace.id,
      method: trace.method,
      route: trace.route,
      status,
      duration_ms: round2(totalMs),
    }
    if (trace.provider !== undefined) {
      line["model"] = trace.model
      line["provider"] = trace.provider
      line["upstream_ms"] = round2(trace.upstreamMs)
      line["gateway_ms"] = round2((trace.streaming ? trace.headMs : totalMs) - trace.upstreamMs)
      if (trace.firstTokenMs !== undefined) line["ttft_ms"] = round2(trace.firstTokenMs)
    }
    if (trace.generationId !== undefined) line["generation_id"] = trace.generationId
    if (trace.streaming) {
      line["stream"] = true
      line["outcome"] = trace.outcome
    }
    if (debug && trace.body !== undefined) line["request_body"] = trace.body
    logWriter.write(JSON.stringify(line))
  }
}
