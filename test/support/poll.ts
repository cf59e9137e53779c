/** Polling helpers for tests that watch a value settle (bytes sent, rows written). */

/** Waits until `value()` stops changing for `quietMs`, polling every 50 ms; its last value. */
export const settledValue = async (value: () => number, quietMs = 500, maxMs = 15_000): Promise<number> => {
  const until = performance.now() + maxMs
  let last = value()
  let since = performance.now()
  while (performance.now() < until) {
    await Bun.sleep(50)
    const now = value()
    if (now !== last) {
      last = now
      since = performance.now()
    } else if (performance.now() - since >= quietMs) break
  }
  return last
}
