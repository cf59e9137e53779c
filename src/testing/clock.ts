/**
 * The clock seam (src/clock.ts) bound to Effect's TestClock: `now()` reads the TestClock's time
 * and a timer is a sleep on it, so `TestClock.adjust` fires every timer it passes, in order.
 * The gateway's own Effect runtime gets a Clock that reads the same time (its sleeps stay real:
 * a service's retry loop is not stopped by a clock nobody moves).
 */
import { Clock, Duration, Effect, Fiber, Layer, TestClock } from "effect"
import { bindClock, type ClockBinding } from "../clock.js"

export const testClockBinding = (clock: TestClock.TestClock): ClockBinding => ({
  now: () => clock.unsafeCurrentTimeMillis(),
  setTimer: (callback, ms) => {
    const fiber = Effect.runFork(Effect.andThen(clock.sleep(Duration.millis(Math.max(1, ms))), Effect.sync(callback)))
    return { cancel: () => void Effect.runFork(Fiber.interrupt(fiber)) }
  },
  clearTimer: (handle) => {
    if (typeof handle === "object" && handle !== null && "cancel" in handle) handle.cancel()
  },
})

/** A Clock whose time is the seam's (the bound TestClock's) and whose sleeps are real. */
export const seamClockLayer = (clock: TestClock.TestClock): Layer.Layer<never> => {
  const live = Clock.make()
  const seam: Clock.Clock = {
    [Clock.ClockTypeId]: Clock.ClockTypeId,
    unsafeCurrentTimeMillis: () => clock.unsafeCurrentTimeMillis(),
    unsafeCurrentTimeNanos: () => BigInt(Math.floor(clock.unsafeCurrentTimeMillis())) * 1_000_000n,
    currentTimeMillis: Effect.sync(() => clock.unsafeCurrentTimeMillis()),
    currentTimeNanos: Effect.sync(() => BigInt(Math.floor(clock.unsafeCurrentTimeMillis())) * 1_000_000n),
    sleep: (duration) => live.sleep(duration),
  }
  return Layer.setClock(seam)
}

/**
 * Binds the seam to the fiber's TestClock (from `TestContext.TestContext`) for the scope, starting
 * at `startAt` (Unix ms); the gateway's Clock layer to go with it.
 */
export const bindTestClock = (startAt: number) =>
  Effect.gen(function* () {
    const clock = yield* TestClock.testClock()
    yield* clock.setTime(startAt)
    yield* Effect.acquireRelease(Effect.sync(() => bindClock(testClockBinding(clock))), (unbind) => Effect.sync(unbind))
    return seamClockLayer(clock)
  })
