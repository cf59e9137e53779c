/** Young-generation collections are asked for only while enough streams are open, and stop after. */
import { expect, test } from "bun:test"
import { makeGcPacer } from "../../src/http/responses/gc-pacer"

// Interval 20 ms: the trailing collection comes 80 ms after the pacer stops. Waits leave wide margins.
test("below the threshold nothing is collected; at it, every interval; below it again, one trailing collection", async () => {
  let collections = 0
  const pacer = makeGcPacer(3, 20, () => {
    collections++
  })
  pacer.opened()
  pacer.opened()
  await Bun.sleep(60)
  expect(collections).toBe(0)
  pacer.opened()
  expect(pacer.open).toBe(3)
  await Bun.sleep(110)
  expect(collections).toBeGreaterThanOrEqual(2)
  pacer.closed()
  const atStop = collections
  await Bun.sleep(40)
  expect(collections).toBe(atStop)
  expect(pacer.open).toBe(2)
  await Bun.sleep(120)
  expect(collections).toBe(atStop + 1)
  await Bun.sleep(120)
  expect(collections).toBe(atStop + 1)
})

test("more closes than opens never count below zero, and the pacer starts again when streams come back", async () => {
  let collections = 0
  const pacer = makeGcPacer(1, 20, () => {
    collections++
  })
  pacer.closed()
  expect(pacer.open).toBe(0)
  await Bun.sleep(60)
  expect(collections).toBe(0)
  pacer.opened()
  await Bun.sleep(90)
  expect(collections).toBeGreaterThanOrEqual(2)
  pacer.closed()
  pacer.closed()
  expect(pacer.open).toBe(0)
  const stopped = collections
  await Bun.sleep(200)
  // The one trailing collection, and no interval left running.
  expect(collections).toBe(stopped + 1)
})

test("streams still ending after the fall put the trailing collection off until they have ended", async () => {
  let collections = 0
  const pacer = makeGcPacer(2, 20, () => {
    collections++
  })
  pacer.opened()
  pacer.opened()
  pacer.opened()
  pacer.closed()
  pacer.closed()
  // Below the threshold now: the trailing collection would come in 80 ms, but another stream ends at 50 ms.
  const atFall = collections
  await Bun.sleep(50)
  pacer.closed()
  await Bun.sleep(50)
  expect(collections).toBe(atFall)
  await Bun.sleep(150)
  expect(collections).toBe(atFall + 1)
})
