/**
 * Young-generation collections paced by open streams. Each relayed event leaves a little garbage
 * (the upstream chunk, its parse, the event text); with thousands of streams open that is tens
 * of MB between the collections the engine schedules itself, and RSS swings by as much (2,000
 * held streams: ~150 MB steady, spikes to 190-217 MB). While at least `threshold` streams are
 * open, `Bun.gc(false)` is asked for every `intervalMs`: it returns in well under a millisecond
 * here and never blocks for a full collection. When the count falls below the threshold, one
 * more is asked for `4 × intervalMs` later, so what the streams' ends left (their records, the
 * last events) is reclaimed and RSS goes back down instead of waiting for the engine's own timing.
 */
export interface GcPacer {
  opened(): void
  closed(): void
  /** Streams counted open now. */
  readonly open: number
}

export const makeGcPacer = (threshold: number, intervalMs: number, collect: () => void = () => Bun.gc(false)): GcPacer => {
  let open = 0
  let timer: ReturnType<typeof setInterval> | undefined
  return {
    opened() {
      open++
      if (open >= threshold && timer === undefined) {
        timer = setInterval(collect, intervalMs)
        // Never what keeps the process alive.
        timer.unref?.()
      }
    },
    closed() {
      open = Math.max(0, open - 1)
      if (open < threshold && timer !== undefined) {
        clearInterval(timer)
        timer = undefined
        setTimeout(collect, intervalMs * 4).unref?.()
      }
    },
    get open() {
      return open
    },
  }
}

/** The process's pacer for relayed streams: from 256 open, a young collection every 250 ms. */
export const streamGcPacer: GcPacer = makeGcPacer(256, 250)
