/**
 * The one clock seam of the gateway's plain code: `now()` and one-shot timers. Production binds it
 * to the real clock (Date.now, setTimeout); the test kit (src/testing/) binds it to Effect's
 * TestClock, so `TestClock.adjust` moves limit resets, cooldowns, sticky TTLs, cache TTLs and
 * broadcast retries together (docs/testing.md). A read is one indirect call: the hot path keeps
 * its plain code (docs/pipeline.md), it only reads time through here.
 */

/** What a timer call returns: passed back to `clearTimer`. */
export type TimerHandle = { readonly cancel: () => void } | ReturnType<typeof setTimeout>

export interface ClockBinding {
  readonly now: () => number
  readonly setTimer: (callback: () => void, ms: number) => TimerHandle
  readonly clearTimer: (handle: TimerHandle) => void
}

const isCancellable = (handle: TimerHandle): handle is { readonly cancel: () => void } =>
  typeof handle === "object" && handle !== null && "cancel" in handle

export const realClock: ClockBinding = {
  now: Date.now,
  setTimer: (callback, ms) => setTimeout(callback, ms),
  clearTimer: (handle) => {
    if (isCancellable(handle)) handle.cancel()
    else clearTimeout(handle)
  },
}

let bound: ClockBinding = realClock

/** Unix ms, from the bound clock. */
export const now = (): number => bound.now()

/** Calls `callback` once after `ms` of the bound clock. */
export const setTimer = (callback: () => void, ms: number): TimerHandle => bound.setTimer(callback, ms)

/** Cancels a timer from `setTimer` (either clock's: a timer outlives a rebinding). */
export const clearTimer = (handle: TimerHandle): void => {
  if (isCancellable(handle)) handle.cancel()
  else clearTimeout(handle)
}

/**
 * Binds the seam to `clock` until the returned function is called (which restores the previous
 * binding). The binding is the process's: one kit at a time drives the clock.
 */
export const bindClock = (clock: ClockBinding): (() => void) => {
  const previous = bound
  bound = clock
  return () => {
    bound = previous
  }
}
