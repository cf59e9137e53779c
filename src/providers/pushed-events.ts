/**
 * An upstream stream's events as batches, one per network read, handed on one of two ways:
 * pushed to a subscriber from the read callback (`subscribe`: no promise per batch, the relay's
 * way), or queued for iteration (`next`), the upstream's socket paused while the queue is long.
 * The SSE formats' reader (http.ts) and ConverseStream's (bedrock/stream.ts) translate; this
 * delivers, the same way for both.
 */
import type { UpstreamResponse } from "./http1"
import { type EventConsumer, ProviderError, type ProviderEvent, type Subscription } from "./types"

export type Step = IteratorResult<ReadonlyArray<ProviderEvent>, void>
export const DONE: Step = { done: true, value: undefined }

/** What the reader needs of its call's link (http.ts's UpstreamLink): the silence check's pause, its activity mark, its end. */
export interface ReaderLink {
  paused: boolean
  touch(): void
  close(): void
}

/**
 * How long `open` waits for a stream's first event before the answer is committed to the client
 * anyway (an upstream that thinks before its first event): until then a failure is one before
 * the first byte, with failover; the client's first byte waits for it as long.
 */
export const FIRST_EVENT_WAIT_MS = 1_000

/** Batches queued for an iteration beyond this pause the upstream's socket until it catches up. */
const HIGH_WATER = 16

/** `L`: the reader's link (its own methods stay the subclass's to call). */
export abstract class PushedEvents<L extends ReaderLink = ReaderLink> implements AsyncIterableIterator<ReadonlyArray<ProviderEvent>> {
  private readonly queue: Array<ReadonlyArray<ProviderEvent>> = []
  /** Set once no more batches come: DONE, or the error to throw. */
  protected last: Step | ProviderError | undefined
  private waiting: { resolve: (step: Step) => void; reject: (e: unknown) => void } | undefined
  /** Set by `subscribe`: batches go to it as they are translated, and nothing is queued. */
  private consumer: EventConsumer | undefined
  protected bodyOver = false
  /** Set while `firstEvent` waits: called at the first batch or the settlement. */
  private onFirst: (() => void) | undefined

  /**
   * Resolves once the first batch is read, or after `maxMs` without one; rejects with the failure
   * the answer ended with before any batch. What an adapter's `open` waits for before the answer is
   * the client's: a stream that fails first fails before the first byte, with failover.
   */
  async firstEvent(maxMs: number = FIRST_EVENT_WAIT_MS): Promise<void> {
    if (this.queue.length === 0 && this.last === undefined) {
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => this.onFirst?.(), maxMs)
        this.onFirst = () => {
          this.onFirst = undefined
          clearTimeout(timer)
          resolve()
        }
      })
    }
    if (this.queue.length === 0 && this.consumer === undefined && this.last instanceof ProviderError) throw this.last
  }

  constructor(
    protected readonly response: UpstreamResponse,
    protected readonly link: L,
  ) {}

  [Symbol.asyncIterator](): this {
    return this
  }

  next(): Promise<Step> {
    const batch = this.queue.shift()
    if (this.link.paused && this.consumer === undefined && this.queue.length < HIGH_WATER / 2) this.resume()
    if (batch !== undefined) return Promise.resolve({ done: false, value: batch })
    const last = this.last
    if (last instanceof ProviderError) return Promise.reject(last)
    if (last !== undefined) return Promise.resolve(last)
    return new Promise((resolve, reject) => {
      this.waiting = { resolve, reject }
    })
  }

  subscribe(consumer: EventConsumer): Subscription {
    this.consumer = consumer
    const queued = this.queue.splice(0)
    for (const batch of queued) this.push(batch)
    if (this.last !== undefined && this.consumer !== undefined) this.settle(this.last)
    return {
      stop: () => {
        this.consumer = undefined
        void this.return()
      },
      pause: () => this.pause(),
      resume: () => this.resume(),
    }
  }

  /** Stops reading the upstream (its socket pauses) until `resume`; not once the answer is over. */
  pause(): void {
    if (this.bodyOver || this.last !== undefined || this.link.paused) return
    this.link.paused = true
    this.response.pause()
  }

  resume(): void {
    if (!this.link.paused) return
    this.link.paused = false
    this.link.touch()
    this.response.resume()
  }

  /** The consumer stopped early: drop the upstream at once. */
  return(): Promise<Step> {
    if (!this.bodyOver) this.closeBody(true)
    this.queue.length = 0
    this.last ??= DONE
    return Promise.resolve(DONE)
  }

  protected push(batch: ReadonlyArray<ProviderEvent>): void {
    const consumer = this.consumer
    if (consumer !== undefined) {
      try {
        consumer.batch(batch)
      } catch (cause) {
        // The consumer failed on this batch: the answer cannot go on.
        this.consumer = undefined
        this.last = DONE
        this.closeBody(true)
        consumer.error(cause)
      }
      return
    }
    const waiting = this.waiting
    if (waiting !== undefined) {
      this.waiting = undefined
      waiting.resolve({ done: false, value: batch })
      return
    }
    this.queue.push(batch)
    if (this.queue.length >= HIGH_WATER) this.pause()
    this.onFirst?.()
  }

  protected settle(last: Step | ProviderError): void {
    this.last = last
    this.onFirst?.()
    // The rest of the body (the framing's end) is still read, for the connection's reuse.
    if (this.link.paused) this.resume()
    const consumer = this.consumer
    if (consumer !== undefined) {
      this.consumer = undefined
      if (last instanceof ProviderError) consumer.error(last)
      else consumer.end()
      return
    }
    const waiting = this.waiting
    if (waiting === undefined || this.queue.length > 0) return
    this.waiting = undefined
    if (last instanceof ProviderError) waiting.reject(last)
    else waiting.resolve(last)
  }

  /**
   * Settles with `failure` after the events in `out`, unless the answer had already finished (the
   * translator's `end` finds its finish reason: only the terminal event is missing). Then what
   * failed (a reset, a stall, an error event, a stray line) came after the answer, which ends
   * complete with the usage it reported, as a body that closed there would; failed, it was
   * charged an estimate and the client told to ask, and pay, again.
   */
  protected failAfter(failure: ProviderError, out: Array<ProviderEvent>, translator: { end(out: Array<ProviderEvent>): boolean }): void {
    let complete = false
    try {
      complete = translator.end(out)
    } catch {
      // A translator that cannot end here had not finished.
    }
    if (out.length > 0) this.push(out)
    this.settle(complete ? DONE : failure)
  }

  /** The body is over for this reader: the link's checks end, and `drop` cancels the rest of it. */
  protected closeBody(drop: boolean): void {
    if (this.bodyOver) return
    this.bodyOver = true
    this.link.close()
    if (drop) this.response.cancel()
  }
}
