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
 * (closes put it off for at most `40 × intervalMs` after the fall): one pause after the burst
 * (~30-90 ms after 2,000 streams here, more with a larger heap), and RSS back within a few % of
 * idle in about a second. Full collections are at least `fullGapMs` apart (30 s): a count
 * hovering at the threshold would otherwise pause the process at every dip; a deferred one runs
 * when the gap has passed.
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
  /** Full collections are at least this far apart: a count that hovers at the threshold does not pause the process each time it dips. */
  fullGapMs: number = intervalMs * 120,
): GcPacer => {
  let open = 0
  let timer: ReturnType<typeof setInterval> | undefined
  let tail: ReturnType<typeof setTimeout> | undefined
  /** When the count fell below the threshold: closes put the full collection off for at most 40 intervals more. */
  let fellAt = 0
  let lastFullAt = Number.NEGATIVE_INFINITY
  const later = (ms: number) => {
    tail = setTimeout(runTail, ms)
    // Never what keeps the process alive.
    tail.unref?.()
  }
  function runTail() {
    tail = undefined
    const wait = lastFullAt + fullGapMs - performance.now()
    if (wait > 0) return later(wait)
    lastFullAt = performance.now()
    collectFully()
  }
  const armTail = () => {
    if (tail !== undefined) clearTimeout(tail)
    later(intervalMs * 4)
  }
  return {
    opened() {
      open++
      if (open >= threshold && timer === undefined) {
        if (tail !== undefined) clearTimeout(tail)
        tail = undefined
        timer = setInterval(collect, intervalMs)
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

/** The process's pacer for relayed streams: from 256 open, a collection every 250 ms; a full one after, at most every 30 s. */
export const streamGcPacer: GcPacer = makeGcPacer(256, 250)
