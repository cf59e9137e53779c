import { describe, expect, test } from "bun:test"
import { PlainAbort } from "../../src/providers/abort"

describe("PlainAbort", () => {
  test("listeners run once each, in the order added; removed ones and late ones never", () => {
    const abort = new PlainAbort()
    const calls: Array<string> = []
    const a = () => calls.push("a")
    const b = () => calls.push("b")
    const c = () => calls.push("c")
    abort.signal.addEventListener("abort", a)
    abort.signal.addEventListener("abort", b)
    abort.signal.addEventListener("abort", c)
    abort.signal.removeEventListener("abort", b)
    expect(abort.signal.aborted).toBe(false)
    abort.abort(new Error("why"))
    abort.abort(new Error("again"))
    abort.signal.addEventListener("abort", () => calls.push("late"))
    expect(calls).toEqual(["a", "c"])
    expect(abort.signal.aborted).toBe(true)
    expect((abort.signal.reason as Error).message).toBe("why")
  })

  test("the same listener added twice runs once, as with an AbortSignal", () => {
    const count = (target: { addEventListener: PlainAbort["addEventListener"] }, abort: () => void) => {
      let calls = 0
      const listener = () => calls++
      target.addEventListener("abort", listener)
      target.addEventListener("abort", listener)
      abort()
      return calls
    }
    const plain = new PlainAbort()
    const native = new AbortController()
    expect(count(plain, () => plain.abort())).toBe(1)
    expect(count(native.signal, () => native.abort())).toBe(1)
  })

  test("without a reason it aborts with an AbortError, as AbortController does", () => {
    const plain = new PlainAbort()
    const native = new AbortController()
    plain.abort()
    native.abort()
    expect((plain.reason as DOMException).name).toBe((native.signal.reason as DOMException).name)
    expect(plain.reason).toBeInstanceOf(DOMException)
  })

  test("a listener removed by an earlier one during the abort does not run, as with an AbortSignal", () => {
    const run = (target: { addEventListener: PlainAbort["addEventListener"]; removeEventListener: PlainAbort["removeEventListener"] }, abort: () => void) => {
      const calls: Array<string> = []
      const second = () => calls.push("second")
      target.addEventListener("abort", () => {
        calls.push("first")
        target.removeEventListener("abort", second)
      })
      target.addEventListener("abort", second)
      target.addEventListener("abort", () => calls.push("third"))
      abort()
      return calls
    }
    const plain = new PlainAbort()
    const native = new AbortController()
    expect(run(plain, () => plain.abort())).toEqual(["first", "third"])
    expect(run(native.signal, () => native.abort())).toEqual(["first", "third"])
  })
})
