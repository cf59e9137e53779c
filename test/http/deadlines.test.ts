/** The model requests' deadlines (src/deadlines.ts): one list, one timer. */
import { describe, expect, test } from "bun:test"
import { Deadlines } from "../../src/deadlines.js"

describe("Deadlines", () => {
  test("each deadline fires once, `ms` after it was set, in the order set", async () => {
    const deadlines = new Deadlines(40)
    const fired: Array<[string, number]> = []
    const start = performance.now()
    deadlines.add(() => fired.push(["a", performance.now() - start]))
    await Bun.sleep(15)
    deadlines.add(() => fired.push(["b", performance.now() - start]))
    expect(deadlines.size).toBe(2)
    await Bun.sleep(90)
    expect(fired.map(([name]) => name)).toEqual(["a", "b"])
    expect(fired[0]![1]).toBeGreaterThanOrEqual(39)
    expect(fired[1]![1]).toBeGreaterThanOrEqual(54)
    expect(deadlines.size).toBe(0)
  })

  test("a removed deadline never fires, wherever it was in the list; the others still do", async () => {
    const deadlines = new Deadlines(30)
    const fired: Array<string> = []
    const entries = ["a", "b", "c", "d"].map((name) => ({ name, entry: deadlines.add(() => fired.push(name)) }))
    deadlines.remove(entries[0]!.entry) // the head, the timer's own
    deadlines.remove(entries[2]!.entry) // the middle
    deadlines.remove(entries[2]!.entry) // twice is harmless
    expect(deadlines.size).toBe(2)
    await Bun.sleep(70)
    expect(fired).toEqual(["b", "d"])
  })

  test("after the list empties, a new deadline still fires on time (the old timer re-arms for it)", async () => {
    const deadlines = new Deadlines(30)
    const fired: Array<number> = []
    deadlines.remove(deadlines.add(() => fired.push(0)))
    await Bun.sleep(10)
    const start = performance.now()
    deadlines.add(() => fired.push(performance.now() - start))
    await Bun.sleep(80)
    expect(fired).toHaveLength(1)
    expect(fired[0]!).toBeGreaterThanOrEqual(29)
  })

  test("a handler that throws does not stop the ones due with it", async () => {
    const deadlines = new Deadlines(10)
    const fired: Array<string> = []
    const quiet = console.error
    console.error = () => {}
    try {
      deadlines.add(() => {
        throw new Error("boom")
      })
      deadlines.add(() => fired.push("after"))
      await Bun.sleep(50)
    } finally {
      console.error = quiet
    }
    expect(fired).toEqual(["after"])
  })

  test("a deadline with extra time falls due after it, and a shorter one set later still fires first (body deadlines)", async () => {
    const deadlines = new Deadlines(20)
    const fired: Array<string> = []
    deadlines.add(() => fired.push("long"), 400)
    deadlines.add(() => fired.push("middle"), 200)
    deadlines.add(() => fired.push("short"))
    await Bun.sleep(100)
    expect(fired).toEqual(["short"])
    await Bun.sleep(600)
    expect(fired).toEqual(["short", "middle", "long"])
    expect(deadlines.size).toBe(0)
  })

  test("a deadline set with a negative offset (time the stages used) falls due before those set earlier in full", async () => {
    const deadlines = new Deadlines(400)
    const fired: Array<string> = []
    deadlines.add(() => fired.push("full"))
    deadlines.add(() => fired.push("stages used 380 ms"), -380)
    await Bun.sleep(150)
    expect(fired).toEqual(["stages used 380 ms"])
    await Bun.sleep(500)
    expect(fired).toEqual(["stages used 380 ms", "full"])
  })
})
