/**
 * Checkpoints of a SQLite file off the thread that serves requests: starts the checkpointer
 * Worker (src/store/checkpointer.ts), starts it again when it dies, and gives the connections of
 * this thread the mark they keep as a backstop (`BACKSTOP_AUTOCHECKPOINT`).
 */
import type { CheckpointDone, CheckpointerStart } from "./checkpointer.js"

/** In the compiled binary (scripts/build adds the Worker as an entry point, root `.`) it is found by its path from the root. */
const workerUrl = import.meta.url.includes("/$bunfs/") ? "./src/store/checkpointer.ts" : new URL("./checkpointer.ts", import.meta.url).href

/**
 * `wal_autocheckpoint` of this thread's connections to a file (pages, ~64 MB of 4 KB): far past
 * the checkpointer's mark (1,000), so that they checkpoint only if it has stopped (a Worker that
 * cannot start): the log stays bounded, at the price of a longer pause then.
 */
export const BACKSTOP_AUTOCHECKPOINT = 16_384

/** A Worker that died is started again after this long. */
const RESTART_MS = 1_000

export interface Checkpoints {
  /** Checkpoints the Worker has reported (tests). */
  readonly done: () => number
  /** The last one's figures, if any. */
  readonly last: () => CheckpointDone | undefined
  readonly stop: () => void
  /** Ends the current Worker as a crash would (tests); it is started again. */
  readonly kill: () => void
  /** Workers started so far (1 + restarts). */
  readonly starts: () => number
}

/** How often the Worker looks at the log's length, and how long a shorter log waits once it stops growing. */
export interface CheckpointTiming {
  readonly pollMs: number
  readonly idleMs: number
}

const TIMING: CheckpointTiming = { pollMs: 100, idleMs: 10_000 }

export const startCheckpoints = (filename: string, onError: (message: string) => void, timing: CheckpointTiming = TIMING): Checkpoints => {
  let done = 0
  let last: CheckpointDone | undefined
  let stopping = false
  let worker: Worker | undefined
  let started = 0
  const spawn = () => {
    started++
    const w = new Worker(workerUrl)
    worker = w
    w.addEventListener("message", (event: MessageEvent<CheckpointDone>) => {
      done++
      last = event.data
    })
    w.addEventListener("error", (event) => {
      onError(`the SQLite checkpointer Worker failed: ${event.message}`)
      w.terminate()
    })
    w.addEventListener("close", () => {
      if (worker === w) worker = undefined
      if (!stopping) setTimeout(() => stopping || spawn(), RESTART_MS).unref()
    })
    // The process ends when the server does, not when the Worker does (Bun's Worker has `unref`; the DOM type does not).
    ;(w as Worker & { unref: () => void }).unref()
    w.postMessage({ filename, ...timing } satisfies CheckpointerStart)
  }
  spawn()
  return {
    done: () => done,
    last: () => last,
    stop: () => {
      stopping = true
      worker?.terminate()
      worker = undefined
    },
    kill: () => worker?.terminate(),
    starts: () => started,
  }
}
