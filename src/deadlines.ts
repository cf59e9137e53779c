/**
 * Deadlines of one length: the model requests' (one list per route) and the upstream calls'
 * silence checks (one list per provider timeout, src/providers/http.ts). Every deadline of a list has the same length, so the order
 * they are set in is the order they fall due: they are kept in a linked list (O(1) to add and to
 * remove) with one timer, for the earliest. A timer of its own per request (setTimeout, then
 * clearTimeout when the answer ends) was ~1.5 % of the gateway's main-thread CPU at 32
 * connections (bun --cpu-prof, JSON answers).
 *
 * The timer is not re-armed when a request ends: it fires at the deadline it was set for, finds
 * the list's new head not yet due, and is set again for it. It is unref'd, so a list emptied at
 * shutdown does not hold the process.
 */
export class Deadline {
  prev: Deadline | undefined = undefined
  next: Deadline | undefined = undefined
  linked = true
  constructor(
    readonly at: number,
    readonly onExpire: () => void,
  ) {}
}

export class Deadlines {
  private head: Deadline | undefined
  private tail: Deadline | undefined
  private timer: ReturnType<typeof setTimeout> | undefined
  private armedAt = 0
  private count = 0

  constructor(
    readonly ms: number,
    private readonly now: () => number = () => performance.now(),
    /** A handler that threw (the request path's error log; stderr by default). */
    private readonly failed: (e: unknown) => void = (e) => console.error("gateway: a request deadline's handler failed", e),
  ) {}

  /** Requests with a deadline pending. */
  get size(): number {
    return this.count
  }

  /**
   * `onExpire` runs once `ms` (plus `extraMs`) from now, unless the deadline is removed before.
   * Deadlines of the same length append in O(1); a longer one walks back to its place.
   */
  add(onExpire: () => void, extraMs = 0): Deadline {
    const entry = new Deadline(this.now() + this.ms + extraMs, onExpire)
    let after = this.tail
    while (after !== undefined && after.at > entry.at) after = after.prev
    if (after === undefined) {
      const head = this.head
      entry.next = head
      if (head === undefined) this.tail = entry
      else head.prev = entry
      this.head = entry
    } else {
      const next = after.next
      entry.prev = after
      entry.next = next
      if (next === undefined) this.tail = entry
      else next.prev = entry
      after.next = entry
    }
    this.count++
    if (this.timer === undefined) this.arm(entry.at)
    else if (entry.at < this.armedAt) {
      // Due before the deadline the timer waits for (one set with a longer extra).
      clearTimeout(this.timer)
      this.arm(entry.at)
    }
    return entry
  }

  remove(entry: Deadline): void {
    if (!entry.linked) return
    entry.linked = false
    const { prev, next } = entry
    if (prev === undefined) this.head = next
    else prev.next = next
    if (next === undefined) this.tail = prev
    else next.prev = prev
    entry.prev = entry.next = undefined
    this.count--
  }

  private arm(at: number): void {
    this.armedAt = at
    this.timer = setTimeout(this.fire, Math.max(0, Math.ceil(at - this.now())))
    this.timer.unref?.()
  }

  private readonly fire = (): void => {
    this.timer = undefined
    const now = this.now()
    for (let head = this.head; head !== undefined && head.at <= now; head = this.head) {
      this.remove(head)
      try {
        head.onExpire()
      } catch (e) {
        this.failed(e)
      }
    }
    if (this.head !== undefined) this.arm(this.head.at)
  }
}
