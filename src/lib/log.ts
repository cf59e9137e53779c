/**
 * Structured logs: JSON lines on stdout (`GATEWAY_LOG_LEVEL`, default info), written in batches
 * (see `LineWriter`): the request path's error lines (`makeErrorLog`), the services' own
 * `Effect.log*` lines, and the server's one line per request (src/http/request-log.ts), all in
 * one shape. `none` writes nothing.
 */
import { Cause, HashMap, Layer, Logger, LogLevel } from "effect"
import type { Settings } from "../config/Config.js"
import { isoTime } from "../domain/time.js"

export type LogLevelName = Settings["logLevel"]

/** Levels by rank: a line is written when its level ranks at least the configured one. */
export const RANK: Record<LogLevelName, number> = { debug: 0, info: 1, warn: 2, error: 3, none: 4 }

/** How long a line may wait in the buffer before it is written. */
const LOG_FLUSH_MS = 50
/** A buffer this long is written at once. */
const LOG_FLUSH_BYTES = 65_536

/**
 * Buffered stdout: lines go out `flushMs` after the first of them, or at once when `maxChars`
 * are waiting; the server flushes at shutdown, and the process at exit. At 32 connections a
 * write per run of ready work (a microtask) was a write every one to three requests; now it is
 * one per ~200 request lines. The timer is unref'd: a waiting line does not hold the process.
 */
export class LineWriter {
  private buffer = ""
  private timer: ReturnType<typeof setTimeout> | undefined
  private exitHooked = false

  constructor(
    private readonly out: (text: string) => void = (text) => {
      process.stdout.write(text)
    },
    private readonly flushMs = LOG_FLUSH_MS,
    private readonly maxChars = LOG_FLUSH_BYTES,
  ) {}

  write(line: string): void {
    this.buffer += line
    this.buffer += "\n"
    if (this.buffer.length > this.maxChars) this.flush()
    else if (this.timer === undefined) {
      this.timer = setTimeout(this.flush, this.flushMs)
      this.timer.unref?.()
      if (!this.exitHooked) {
        this.exitHooked = true
        process.on("exit", this.flush)
      }
    }
  }

  readonly flush = (): void => {
    if (this.timer !== undefined) clearTimeout(this.timer)
    this.timer = undefined
    if (this.buffer === "") return
    const out = this.buffer
    this.buffer = ""
    this.out(out)
  }
}

export const logWriter = new LineWriter()

const effectLevel: Record<LogLevelName, LogLevel.LogLevel> = {
  debug: LogLevel.Debug,
  info: LogLevel.Info,
  warn: LogLevel.Warning,
  error: LogLevel.Error,
  none: LogLevel.None,
}

const levelName = (level: LogLevel.LogLevel) =>
  level._tag === "Warning" ? "warn" : level._tag === "Fatal" ? "error" : level.label.toLowerCase()

/** `Effect.log*` of the services as JSON lines in the request lines' shape, from the configured level. */
const jsonLogger = Logger.make(({ logLevel, message, cause, annotations, date }) => {
  const messages = Array.isArray(message) ? message : [message]
  const line: Record<string, unknown> = {
    time: date.toISOString(),
    level: levelName(logLevel),
    msg: messages.map((m) => (typeof m === "string" ? m : JSON.stringify(m))).join(" "),
  }
  for (const [key, value] of HashMap.toEntries(annotations)) line[key] = value
  if (!Cause.isEmpty(cause)) line["cause"] = Cause.pretty(cause, { renderErrorCause: true })
  logWriter.write(JSON.stringify(line))
})

/** The runtime's logger: JSON lines on stdout, nothing below `level`. */
export const loggerLayer = (level: LogLevelName) =>
  Layer.merge(Logger.replace(Logger.defaultLogger, jsonLogger), Logger.minimumLogLevel(effectLevel[level]))


/** Logs a failure on the request path: one error line with the request's id (and its generation's). */
export type ErrorLog = (ids: { readonly requestId?: string; readonly generationId?: string }, msg: string, error?: unknown) => void

/** The request path's error log, in the request lines' shape; silent at level `none`. */
export const makeErrorLog = (level: LogLevelName, writer: LineWriter = logWriter): ErrorLog => {
  if (RANK[level] >= RANK.none) return () => undefined
  return (ids, msg, error) => {
    const line: Record<string, unknown> = { time: isoTime(Date.now()), level: "error", msg }
    if (ids.requestId !== undefined) line["request_id"] = ids.requestId
    if (ids.generationId !== undefined && ids.generationId !== "") line["generation_id"] = ids.generationId
    if (error !== undefined) line["error"] = error instanceof Error ? (error.stack ?? error.message) : String(error)
    writer.write(JSON.stringify(line))
  }
}
