/** The caps on requests in flight (src/pipeline/lifecycle.ts): addresses are looked up only once they can matter, and then every count is exact. */
import { describe, expect, test } from "bun:test"
import { RequestLifecycle as InFlight, type InFlightSlot } from "../../src/pipeline/lifecycle.js"

const slot = (): InFlightSlot => ({ inFlightRequest: undefined, address: undefined })
const request = (address: string) => new Request(`http://gateway/${address}`)

describe("InFlight", () => {
  const setup = (max: number, perAddress: number) => {
    const lookups: Array<string> = []
    const inFlight = new InFlight(max, perAddress, (req) => {
      const address = new URL(req.url).pathname.slice(1)
      lookups.push(address)
      return address
    })
    return { inFlight, lookups }
  }

  test("while fewer requests than the per-address cap are in flight, no address is looked up", () => {
    const { inFlight, lookups } = setup(100, 3)
    const a = slot()
    const b = slot()
    expect(inFlight.enter(request("x"), a)).toBeUndefined()
    expect(inFlight.enter(request("x"), b)).toBeUndefined()
    inFlight.leave(a)
    inFlight.leave(b)
    expect(inFlight.count).toBe(0)
    expect(lookups).toEqual([])
  })

  test("the per-address cap counts the requests admitted before addresses were looked up", () => {
    const { inFlight } = setup(100, 3)
    const early = [slot(), slot(), slot()]
    for (const s of early) expect(inFlight.enter(request("x"), s)).toBeUndefined()
    // Three in flight, all from x: a fourth from x is over, one from y is not.
    expect(inFlight.enter(request("x"), slot())).toBe("per_address")
    const y = slot()
    expect(inFlight.enter(request("y"), y)).toBeUndefined()
    expect(inFlight.of("x")).toBe(3)
    expect(inFlight.of("y")).toBe(1)
    inFlight.leave(early[0] as InFlightSlot)
    expect(inFlight.of("x")).toBe(2)
    expect(inFlight.enter(request("x"), slot())).toBeUndefined()
    expect(inFlight.count).toBe(4)
  })

  test("over the overall cap every request is refused, whatever its address", () => {
    const { inFlight } = setup(2, 2)
    const a = slot()
    expect(inFlight.enter(request("x"), a)).toBeUndefined()
    expect(inFlight.enter(request("y"), slot())).toBeUndefined()
    expect(inFlight.enter(request("z"), slot())).toBe("overall")
    inFlight.leave(a)
    expect(inFlight.enter(request("z"), slot())).toBeUndefined()
  })

  test("counts return to zero after any mix of attributed and unattributed requests leave", () => {
    const { inFlight } = setup(100, 2)
    const slots = Array.from({ length: 6 }, () => slot())
    for (const [i, s] of slots.entries()) expect(inFlight.enter(request(`a${i % 3}`), s)).toBeUndefined()
    for (const s of slots) inFlight.leave(s)
    expect(inFlight.count).toBe(0)
    for (const address of ["a0", "a1", "a2"]) expect(inFlight.of(address)).toBe(0)
  })
})
