/**
 * Requests in flight, overall and per client address, with their caps. Looking an address up
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

export class InFlight {
  /** Requests in flight now. */
  count = 0
  private readonly byAddress = new Map<string, number>()
  private readonly unattributed = new Set<InFlightSlot>()

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
  }

  /** Requests in flight from `address` that have been attributed to it. */
  of(address: string): number {
    return this.byAddress.get(address) ?? 0
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
