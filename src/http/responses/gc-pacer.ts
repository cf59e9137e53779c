/**
 * Young-generation collections paced by open streams. Each relayed event leaves a little garbage
 * (the upstream chunk, its parse, the event text); with thousands of streams open that is tens
 * of MB between the collections the engine schedules itself, and RSS swings by as much (2,000
 * held streams: ~150 MB steady, spikes to 190-217 MB). While at least `threshold` streams are
 * open, `Bun.gc(false)` is asked for every `intervalMs`: it returns in well under a millisecond
 * here and never blocks for a full collection. When the count falls below the threshold, one
 * more is asked for once closes have stopped for `4 × intervalMs` (at most `40 × intervalMs`
 * after it fell), so what the streams' ends left (their records, the last events) is reclaimed
 * and RSS goes back down instead of waiting for the engine's own timing.
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
  let tail: ReturnType<typeof setTimeout> | undefined
  /** When the count fell below the threshold: the trailing collection is put off by closes for at most 40 intervals. */
  let fellAt = 0
  const armTail = () => {
    if (tail !== undefined) clearTimeout(tail)
    tail = setTimeout(() => {
      tail = undefined
      collect()
    }, intervalMs * 4)
    tail.unref?.()
  }
  return {
    opened() {
      open++
      if (open >= threshold && timer === undefined) {
        if (tail !== undefined) clearTimeout(tail)
        tail = undefined
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
        fellAt = performance.now()
        armTail()
      } else if (tail !== undefined && performance.now() - fellAt < intervalMs * 40) {
        // Streams are still ending: collect once they have.
        armTail()
      }
    },
    get open() {
      return open
    },
  }
}

/** The process's pacer for relayed streams: from 256 open, a young collection every 250 ms. */
export const streamGcPacer: GcPacer = makeGcPacer(256, 250)
