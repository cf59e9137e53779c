/**
 * Paced collections are asked for only while enough streams are open; once the count
 * falls below the threshold and closes stop, one full collection, and nothing after.
 */
import { expect, test } from "bun:test"
import { makeGcPacer } from "../../src/pipeline/gc-pacer"

/** A pacer whose collections are counted, paced and full apart; full ones at least `gapMs` apart. */
const counted = (threshold: number, intervalMs: number, gapMs = 0) => {
  const counts = { young: 0, full: 0 }
  const pacer = makeGcPacer(
    threshold,
    intervalMs,
    () => {
      counts.young++
    },
    () => {
      counts.full++
    },
    gapMs,
  )
  return { pacer, counts }
}

// Interval 20 ms: the trailing collection comes 80 ms after the pacer stops. Waits leave wide margins.
test("below the threshold nothing is collected; at it, a paced collection every interval; below it again, one full collection", async () => {
  const { pacer, counts } = counted(3, 20)
  pacer.opened()
  pacer.opened()
  await Bun.sleep(60)
  expect(counts).toEqual({ young: 0, full: 0 })
  pacer.opened()
  expect(pacer.open).toBe(3)
  // A loaded machine fires timers late: wait for the paced collections rather than a fixed time.
  await until(() => counts.young >= 2)
  expect(counts.full).toBe(0)
  pacer.closed()
  const atStop = counts.young
  const stoppedAt = performance.now()
  await Bun.sleep(40)
  // Before the trailing collection (80 ms after the stop) nothing more; a sleep that overran it is not a check of that.
  if (performance.now() - stoppedAt < 75) expect(counts).toEqual({ young: atStop, full: 0 })
  expect(counts.young).toBe(atStop)
  expect(pacer.open).toBe(2)
  await until(() => counts.full === 1)
  expect(counts).toEqual({ young: atStop, full: 1 })
  await Bun.sleep(120)
  expect(counts).toEqual({ young: atStop, full: 1 })
})

/** Resolves once `done()` holds; fails the test after 5 s. */
const until = async (done: () => boolean): Promise<void> => {
  const deadline = performance.now() + 5_000
  while (!done()) {
    if (performance.now() > deadline) throw new Error("timed out waiting for the pacer")
    await Bun.sleep(2)
  }
}

test("more closes than opens never count below zero, and the pacer starts again when streams come back", async () => {
  const { pacer, counts } = counted(1, 20)
  pacer.closed()
  expect(pacer.open).toBe(0)
  await Bun.sleep(60)
  expect(counts).toEqual({ young: 0, full: 0 })
  pacer.opened()
  // Waits for what must come (a loaded machine fires timers late), fixed sleeps only where nothing may.
  await until(() => counts.young >= 2)
  pacer.closed()
  pacer.closed()
  expect(pacer.open).toBe(0)
  const stopped = counts.young
  await until(() => counts.full === 1)
  await Bun.sleep(120)
  // The one full collection, and no interval left running.
  expect(counts).toEqual({ young: stopped, full: 1 })
  // Back over the threshold: paced collections again, and one more full one after.
  pacer.opened()
  await until(() => counts.young >= stopped + 2)
  pacer.closed()
  await until(() => counts.full === 2)
  await Bun.sleep(120)
  expect(counts.full).toBe(2)
})

test("streams still ending after the fall put the full collection off until they have ended", async () => {
  const { pacer, counts } = counted(2, 20)
  pacer.opened()
  pacer.opened()
  pacer.opened()
  pacer.closed()
  pacer.closed()
  // Below the threshold now: the full collection would come in 80 ms, but another stream ends at 50 ms.
  await Bun.sleep(50)
  pacer.closed()
  await Bun.sleep(50)
  expect(counts.full).toBe(0)
  await until(() => counts.full === 1)
  await Bun.sleep(120)
  expect(counts.full).toBe(1)
})

test("a pacer that never reached the threshold never collects, however streams open and close", async () => {
  const { pacer, counts } = counted(4, 20)
  for (let i = 0; i < 10; i++) {
    pacer.opened()
    pacer.opened()
    pacer.closed()
    pacer.closed()
  }
  await Bun.sleep(150)
  expect(counts).toEqual({ young: 0, full: 0 })
})

test("a count that dips below the threshold again and again gets one full collection per gap, the deferred one after it", async () => {
  const { pacer, counts } = counted(2, 20, 400)
  const burst = () => {
    pacer.opened()
    pacer.opened()
    pacer.closed()
    pacer.closed()
  }
  burst()
  await Bun.sleep(120)
  expect(counts.full).toBe(1)
  // Two more dips within the gap: nothing at once (each would be a pause with streams open).
  burst()
  await Bun.sleep(120)
  burst()
  await Bun.sleep(120)
  expect(counts.full).toBe(1)
  // Once the gap has passed since the first, the deferred collection runs, once.
  await Bun.sleep(250)
  expect(counts.full).toBe(2)
  await Bun.sleep(200)
  expect(counts.full).toBe(2)
})
