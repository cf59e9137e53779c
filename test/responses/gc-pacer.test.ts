/** Young-generation collections are asked for only while enough streams are open, and stop after. */
import { expect, test } from "bun:test"
import { makeGcPacer } from "../../src/http/responses/gc-pacer"

test("below the threshold nothing is collected; at it, every interval; below it again, it stops", async () => {
  let collections = 0
  const pacer = makeGcPacer(3, 10, () => {
    collections++
  })
  pacer.opened()
  pacer.opened()
  await Bun.sleep(40)
  expect(collections).toBe(0)
  pacer.opened()
  expect(pacer.open).toBe(3)
  await Bun.sleep(55)
  expect(collections).toBeGreaterThanOrEqual(3)
  pacer.closed()
  const atStop = collections
  await Bun.sleep(40)
  expect(collections).toBe(atStop)
  expect(pacer.open).toBe(2)
})

test("more closes than opens never count below zero, and the pacer starts again when streams come back", async () => {
  let collections = 0
  const pacer = makeGcPacer(1, 10, () => {
    collections++
  })
  pacer.closed()
  expect(pacer.open).toBe(0)
  pacer.opened()
  await Bun.sleep(35)
  expect(collections).toBeGreaterThanOrEqual(2)
  pacer.closed()
  pacer.closed()
  expect(pacer.open).toBe(0)
  const stopped = collections
  await Bun.sleep(30)
  expect(collections).toBe(stopped)
})
