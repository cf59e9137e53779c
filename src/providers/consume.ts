/**
 * An upstream call's events, pushed to a consumer: straight from the read callback when the
 * call can (`UpstreamCall.subscribe`), otherwise by iterating its `events`.
 */
import type { EventConsumer, ProviderEvent, Subscription, UpstreamCall } from "./types"

/** Starts delivering `call`'s events to `consumer`; paused, an iteration waits before its next step. */
export const consumeEvents = (call: UpstreamCall, consumer: EventConsumer): Subscription => {
  if (call.subscribe !== undefined) return call.subscribe(consumer)
  const iterator = call.events[Symbol.asyncIterator]()
  let stopped = false
  let paused = false
  let wake: (() => void) | undefined
  const run = async () => {
    let next: IteratorResult<ReadonlyArray<ProviderEvent>>
    for (;;) {
      try {
        if (paused) await new Promise<void>((resolve) => (wake = resolve))
        if (stopped) return
        next = await iterator.next()
        if (stopped) return
        if (next.done !== true) consumer.batch(next.value)
      } catch (cause) {
        if (stopped) return
        // The upstream failed, or the consumer did on a batch: either way the answer cannot go on.
        stopped = true
        void iterator.return?.()
        consumer.error(cause)
        return
      }
      if (next.done === true) {
        consumer.end()
        return
      }
    }
  }
  void run()
  const resume = () => {
    paused = false
    const waiting = wake
    wake = undefined
    waiting?.()
  }
  return {
    stop: () => {
      stopped = true
      resume()
      void iterator.return?.()
    },
    pause: () => {
      paused = true
    },
    resume,
  }
}
