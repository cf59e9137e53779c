/**
 * An upstream call's events, pushed to a consumer: straight from the read callback when the
 * call can (`UpstreamCall.subscribe`), otherwise by iterating its `events`.
 */
import type { EventConsumer, ProviderEvent, UpstreamCall } from "./types"

/** Starts delivering `call`'s events to `consumer`; the returned function stops and drops the upstream. */
export const consumeEvents = (call: UpstreamCall, consumer: EventConsumer): (() => void) => {
  if (call.subscribe !== undefined) return call.subscribe(consumer)
  const iterator = call.events[Symbol.asyncIterator]()
  let stopped = false
  const run = async () => {
    let next: IteratorResult<ReadonlyArray<ProviderEvent>>
    for (;;) {
      try {
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
  return () => {
    stopped = true
    void iterator.return?.()
  }
}
