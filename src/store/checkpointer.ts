/**
 * The WAL checkpointer of a SQLite file: a Worker with a connection of its own that copies the
 * write-ahead log back into the database file (`PRAGMA wal_checkpoint(PASSIVE)`: it never waits
 * for, nor blocks, the other connections' writers and readers) once the log holds
 * `CHECKPOINT_FRAMES` frames not yet copied, as SQLite's own automatic checkpoint would, or any
 * at all once it has not grown for `idleMs` (a quiet gateway's file is not left behind). An
 * entry point of scripts/build; src/store/checkpoints.ts starts it.
 *
 * Why a thread: a checkpoint ends with two `fsync`s (the log, then the file), ~3-3.5 ms each on
 * the machine of docs/operations.md's figures, and SQLite runs its automatic one inside the
 * commit that crossed the mark. The ledger commits on the thread that serves requests, so such a
 * commit stopped every request for ~7 ms, a few times a second under load. Here it stops nothing
 * but this thread.
 */
import { Database } from "bun:sqlite"
import { closeSync, openSync, readSync } from "node:fs"

declare const self: Worker

export interface CheckpointerStart {
  readonly filename: string
  /** How often the log's length is looked at. */
  readonly pollMs: number
  /** A log shorter than the mark is copied once it has not grown for this long. */
  readonly idleMs: number
}

/** What a checkpoint did: the log's frames, and how many of them are in the file now. */
export interface CheckpointDone {
  readonly type: "checkpoint"
  readonly log: number
  readonly checkpointed: number
}

/** SQLite's own automatic checkpoint's mark (`wal_autocheckpoint`'s default), in frames (pages). */
const CHECKPOINT_FRAMES = 1000
/** The wal-index is in the machine's byte order. */
const LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1

/**
 * The frames of the log not yet copied to the file, read from the wal-index (the `-shm` file,
 * which every connection to the database maps; sqlite.org/walformat.html): `mxFrame` at byte 16
 * of its header, `nBackfill` at byte 96, in the machine's byte order. Undefined when it cannot
 * be read or is not initialized: the caller then checkpoints on the clock alone. Opened for each
 * read: a descriptor held by the Worker would outlive it when it is terminated (a restart).
 */
const pendingFrames = (shm: string, header: Uint8Array, view: DataView): number | undefined => {
  let fd: number | undefined
  try {
    fd = openSync(shm, "r")
    if (readSync(fd, header, 0, 100, 0) < 100) return undefined
  } catch {
    return undefined
  } finally {
    if (fd !== undefined) closeSync(fd)
  }
  // isInit (byte 12): the header was written by a connection.
  if (header[12] !== 1) return undefined
  const mxFrame = view.getUint32(16, LITTLE_ENDIAN)
  const nBackfill = view.getUint32(96, LITTLE_ENDIAN)
  return mxFrame >= nBackfill ? mxFrame - nBackfill : mxFrame
}

const start = ({ filename, pollMs, idleMs }: CheckpointerStart) => {
  const db = new Database(filename, { readwrite: true })
  // Another process's checkpoint in progress answers BUSY at once: this one is skipped, the next comes.
  db.run("PRAGMA busy_timeout = 0")
  const checkpoint = db.query<{ busy: number; log: number; checkpointed: number }, []>("PRAGMA wal_checkpoint(PASSIVE)")
  const shm = `${filename}-shm`
  const header = new Uint8Array(100)
  const view = new DataView(header.buffer)
  let lastPending = 0
  let grewAt = Date.now()
  const pass = () => {
    const pending = pendingFrames(shm, header, view)
    const now = Date.now()
    if (pending !== undefined) {
      if (pending !== lastPending) grewAt = now
      lastPending = pending
      if (pending === 0 || (pending < CHECKPOINT_FRAMES && now - grewAt < idleMs)) return
    } else if (now - grewAt < idleMs) {
      return
    }
    grewAt = now
    try {
      const row = checkpoint.get()
      if (row !== null && row.busy === 0) self.postMessage({ type: "checkpoint", log: row.log, checkpointed: row.checkpointed } satisfies CheckpointDone)
    } catch {
      // SQLITE_BUSY or a locked file: a later pass tries again.
    }
  }
  // It runs until the host terminates the thread, which closes the connection with it.
  setInterval(pass, pollMs)
}

self.onmessage = (event: MessageEvent<CheckpointerStart>) => start(event.data)
