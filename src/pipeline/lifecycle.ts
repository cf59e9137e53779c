/**
 * The one owner of requests' lives (docs/pipeline.md): which requests are in flight (admitted
 * under the caps, until their answer's last byte), the settlements and records still being
 * handed to the store, and the streams still open. Shutdown waits on it (`idle`, `cutStreams`,
 * `drain`), `/metrics` reads its count, and finish.ts settles and records each request exactly once.
 *
 * Plain code: admission and leaving run per request. Looking an address up
 * (`server.requestIP`) costs a few µs, so it is done only when it can matter: while fewer than
 * `maxPerAddress` requests are in flight in all, no address can be at its cap, and a request is
 * admitted unattributed. The first request that finds `maxPerAddress` or more in flight looks up
 * the addresses of the unattributed ones still running, so from then on every count is exact.
 */

/** What a request holds while in flight (the server's `RequestTrace` carries these fields). */
export interface InFlightSlot {
  /** The request, while it is in flight without its address looked up. */
  inFlightRequest: Request | undefined
  /** The client address it was counted under, once looked up. */
  address: string | undefined
}

export type Refusal = "overall" | "per_address"

export class RequestLifecycle {
  /** Requests in flight now. */
  count = 0
  private readonly byAddress = new Map<string, number>()
  private readonly unattributed = new Set<InFlightSlot>()
  /** Settlements and records handed off and not yet done. */
  private readonly settling = new Set<Promise<unknown>>()
  /** Each open stream's cut (its format's failure event and end). */
  private readonly streams = new Set<() => void>()
  private onIdle: (() => void) | undefined

  constructor(
    readonly max: number,
    readonly maxPerAddress: number,
    private readonly addressOf: (req: Request) => string,
  ) {}

  /** Admits `req` into `slot`, or says which cap it is over (nothing is counted then). */
  enter(req: Request, slot: InFlightSlot): Refusal | undefined {
    if (this.count >= this.max) return "overall"
    if (this.maxPerAddress < this.max) {
      if (this.count < this.maxPerAddress) {
        slot.inFlightRequest = req
        this.unattributed.add(slot)
      } else {
        if (this.unattributed.size > 0) this.attributeAll()
        const address = this.addressOf(req)
        const n = this.byAddress.get(address) ?? 0
        if (n >= this.maxPerAddress) return "per_address"
        this.byAddress.set(address, n + 1)
        slot.address = address
      }
    }
    this.count++
    return undefined
  }

  /** The request's answer has ended (its last byte, or its error). */
  leave(slot: InFlightSlot): void {
    this.count--
    const address = slot.address
    if (address !== undefined) {
      slot.address = undefined
      const n = (this.byAddress.get(address) ?? 1) - 1
      if (n === 0) this.byAddress.delete(address)
      else this.byAddress.set(address, n)
    } else if (slot.inFlightRequest !== undefined) {
      slot.inFlightRequest = undefined
      this.unattributed.delete(slot)
    }
    if (this.count === 0) this.onIdle?.()
  }

  /** Requests in flight from `address` that have been attributed to it. */
  of(address: string): number {
    return this.byAddress.get(address) ?? 0
  }

  /** Resolves once no request is in flight, or after `ms`. */
  idle(ms: number): Promise<void> {
    if (this.count === 0) return Promise.resolve()
    return new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms)
      this.onIdle = () => {
        clearTimeout(timer)
        this.onIdle = undefined
        resolve()
      }
    })
  }

  /** A settlement or record handed off (`done` never rejects): `drain` waits for it. */
  settlingOn(done: Promise<unknown>): void {
    this.settling.add(done)
    void done.then(() => this.settling.delete(done))
  }

  /** Resolves once every settlement and record started so far has been handed to the store. */
  async drain(): Promise<void> {
    while (this.settling.size > 0) await Promise.all([...this.settling])
  }

  openStream(cut: () => void): void {
    this.streams.add(cut)
  }

  closeStream(cut: () => void): void {
    this.streams.delete(cut)
  }

  /** Ends every open stream with its format's failure (server_shutting_down); returns how many. */
  cutStreams(): number {
    const cuts = [...this.streams]
    for (const cut of cuts) cut()
    return cuts.length
  }

  private attributeAll(): void {
    for (const slot of this.unattributed) {
      const address = this.addressOf(slot.inFlightRequest as Request)
      slot.inFlightRequest = undefined
      slot.address = address
      this.byAddress.set(address, (this.byAddress.get(address) ?? 0) + 1)
    }
    this.unattributed.clear()
  }
}
