/**
 * The longest the event loop went without running a 5 ms timer while `work` ran: what a
 * `/v1/health` call arriving meanwhile would have waited.
 */
export const loopLag = async <A>(work: () => Promise<A>): Promise<{ readonly result: A; readonly maxLagMs: number }> => {
  let maxLagMs = 0
  let last = performance.now()
  const timer = setInterval(() => {
    const now = performance.now()
    maxLagMs = Math.max(maxLagMs, now - last)
    last = now
  }, 5)
  try {
    return { result: await work(), maxLagMs }
  } finally {
    clearInterval(timer)
  }
}
