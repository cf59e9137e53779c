/**
 * A SQLite file's gate between the main connection's transactions and a writer on another
 * thread (the delivery Worker, src/broadcast/delivery-worker.ts). A commit on another
 * connection between a read and a write of a deferred transaction on the main connection makes
 * that write fail with SQLITE_BUSY_SNAPSHOT (src/store/sqlite-client.ts); on the same thread the
 * ledger's writers avoid it by running only while no such transaction is open. Another thread
 * cannot see that counter, so it lives in shared memory: one Int32, the main connection's open
 * (or waiting) transactions in the low bits, and two flags: a writer wants in (no new main
 * transaction starts), and a writer is in (its commit runs). The writer waits for the count to
 * reach 0; its writes are short prepared statements or single updates.
 */

const WANT = 1 << 29
const IN = 1 << 30
const COUNT = WANT - 1

export type Gate = Int32Array

export const makeGate = (): Gate => new Int32Array(new SharedArrayBuffer(4))

/** `Atomics.waitAsync` (ES2024; the pinned TypeScript library stops at ES2023). */
type WaitAsync = (
  array: Int32Array,
  index: number,
  value: number,
  timeoutMs: number,
) => { readonly async: false; readonly value: string } | { readonly async: true; readonly value: Promise<string> }
const waitAsync = (Atomics as unknown as { readonly waitAsync: WaitAsync }).waitAsync

const waitChange = (gate: Gate, seen: number, ms: number): Promise<unknown> | undefined => {
  const w = waitAsync(gate, 0, seen, ms)
  return w.async ? w.value : undefined
}

/**
 * Whether a main transaction may open in state `s`: not while a writer is in; while one wants in,
 * only beside a transaction already open (a nested one must not wait for the writer, which waits
 * for the outer one).
 */
const mayEnter = (s: number) => (s & IN) === 0 && ((s & WANT) === 0 || (s & COUNT) > 0)

/** The main side: a transaction opens; at once (true) unless a writer wants in or is in. */
export const enterMain = (gate: Gate): true | Promise<void> => {
  const s = Atomics.load(gate, 0)
  if (mayEnter(s) && Atomics.compareExchange(gate, 0, s, s + 1) === s) return true
  return (async () => {
    for (;;) {
      const now = Atomics.load(gate, 0)
      if (mayEnter(now)) {
        if (Atomics.compareExchange(gate, 0, now, now + 1) === now) return
        continue
      }
      await waitChange(gate, now, 50)
    }
  })()
}

/** The main side: a transaction ended. */
export const leaveMain = (gate: Gate): void => {
  Atomics.sub(gate, 0, 1)
  Atomics.notify(gate, 0)
}

/** Open (or waiting) transactions on the main connection. */
export const mainOpen = (gate: Gate): number => Atomics.load(gate, 0) & COUNT

/**
 * The other thread's side: runs `write` once no main transaction is open, none starting until it
 * ends. One writer at a time (the Worker's writes are serialized here too).
 */
export const asWriter = async <A>(gate: Gate, write: () => A | Promise<A>): Promise<A> => {
  for (;;) {
    const s = Atomics.load(gate, 0)
    if ((s & (WANT | IN)) === 0) {
      if (Atomics.compareExchange(gate, 0, s, s | WANT) === s) break
      continue
    }
    await waitChange(gate, s, 50)
  }
  for (;;) {
    const s = Atomics.load(gate, 0)
    if ((s & COUNT) === 0) {
      if (Atomics.compareExchange(gate, 0, s, IN) === s) break
      continue
    }
    await waitChange(gate, s, 50)
  }
  try {
    return await write()
  } finally {
    Atomics.and(gate, 0, ~(WANT | IN))
    Atomics.notify(gate, 0)
  }
}

/**
 * The other thread ended (its Worker closed, e.g. terminated mid-write): a writer it left in or
 * waiting can never leave, and would hold every main transaction and the next Worker's writes
 * out for good, so its flags go. There is one writer thread a gate, so no live writer loses them.
 */
export const writerGone = (gate: Gate): void => {
  Atomics.and(gate, 0, ~(WANT | IN))
  Atomics.notify(gate, 0)
}

/**
 * For the main thread's writers on connections of their own (the ledger, spend): while the other
 * thread's writer is in, a write would find the file locked and try again after a pause (1 ms,
 * doubling); waiting on the gate instead resumes as soon as it is out. Undefined when none is in.
 */
export const writerOut = (gate: Gate): Promise<void> | undefined => {
  if ((Atomics.load(gate, 0) & IN) === 0) return undefined
  return (async () => {
    for (let s = Atomics.load(gate, 0); (s & IN) !== 0; s = Atomics.load(gate, 0)) await waitChange(gate, s, 50)
  })()
}
