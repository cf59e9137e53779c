/**
 * An upstream call's events, pushed to a consumer: straight from the read callback when the
 * call can (`UpstreamCall.subscribe`), otherwise by iterating its `events`.
 */
import type { EventConsumer, UpstreamCall } from "./types"

/** Starts delivering `call`'s events to `consumer`; the returned function stops and drops the upstream. */
export const consumeEvents = (call: UpstreamCall, consumer: EventConsumer): (() => void) => {
  if (call.subscribe !== undefined) return call.subscribe(consumer)
  const iterator = call.events[Symbol.asyncIterator]()
  let stopped = false
  const run = async () => {
    try {
      for (;;) {
        const next = await iterator.next()
        if (stopped) return
        if (next.done === true) {
          consumer.end()
          return
        }
        consumer.batch(next.value)
      }
    } catch (cause) {
      if (!stopped) consumer.error(cause)
    }
  }
  void run()
  return () => {
    stopped = true
    void iterator.return?.()
  }
}
