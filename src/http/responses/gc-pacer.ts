/**
 * Collections paced by open streams. Each relayed event leaves a little garbage (the upstream
 * chunk, its parse, the event text); with thousands of streams open that is tens of MB between
 * the collections the engine schedules itself, and RSS swings by as much (2,000 held streams:
 * ~150 MB steady, spikes to 190-217 MB). While at least `threshold` streams are open,
 * `Bun.gc(false)` is asked for every `intervalMs`: an asynchronous collection whose scope the
 * engine picks (young while the heap has not grown much), returning in well under a millisecond.
 *
 * Kept that small, the heap never grows enough for the engine to start a full collection of its
 * own, so what the streams promoted while open (sockets, assemblers, records) stays in the old
 * generation after they end, and RSS at its peak, until allocation picks up again (2,000 held
 * streams: 157 MB after vs 99 MB idle). So when the count falls below the threshold, one full,
 * synchronous collection (`Bun.gc(true)`) is made once closes have stopped for `4 × intervalMs`
 * (at most `40 × intervalMs` after it fell): one pause after the burst (~30-90 ms after 2,000
 * streams here), and RSS back within a few % of idle in about a second.
 */
export interface GcPacer {
  opened(): void
  closed(): void
  /** Streams counted open now. */
  readonly open: number
}

export const makeGcPacer = (
  threshold: number,
  intervalMs: number,
  collect: () => void = () => Bun.gc(false),
  collectFully: () => void = () => Bun.gc(true),
): GcPacer => {
  let open = 0
  let timer: ReturnType<typeof setInterval> | undefined
  let tail: ReturnType<typeof setTimeout> | undefined
  /** When the count fell below the threshold: the trailing collection is put off by closes for at most 40 intervals. */
  let fellAt = 0
  const armTail = () => {
    if (tail !== undefined) clearTimeout(tail)
    tail = setTimeout(() => {
      tail = undefined
      collectFully()
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

/** The process's pacer for relayed streams: from 256 open, a collection every 250 ms; a full one after. */
export const streamGcPacer: GcPacer = makeGcPacer(256, 250)
