/**
 * The ledger's spool (docs/operations.md, "When the database goes away"): the batches of
 * generation records the database could not take (unreachable, a lost connection, a failover, a
 * full or read-only SQLite file), each with its settlements and its ledger hooks' rows (the
 * broadcast outbox), kept in order in memory and in an append-only file under the data folder
 * until the ledger writer commits them. Appends are written and fsync'd in groups (every append
 * that arrives while a write is on disk goes in the next one). The file is touched only when a
 * commit has failed: it does not exist while the database takes every batch.
 *
 * The file is JSON lines: `{"s":seq,"i":[items],"x":[hook rows]}` for a batch (no `x` when the
 * hooks could not read the store: they are asked when the batch is committed), and `{"a":seq}`
 * once every batch up to `seq` is committed. A process that starts with the file reads the
 * batches after the last `a` (a line cut short by a crash is the last one, and is skipped: its
 * append never reported durable) and commits them before it serves. The file is removed once
 * nothing is left in it.
 */
import { mkdirSync, readFileSync, statSync } from "node:fs"
import { type FileHandle, open, unlink } from "node:fs/promises"
import { dirname, join } from "node:path"
import type { GenerationEntry } from "../domain/generations.js"
import type { LedgerItem, LedgerRows } from "./ledger.js"
import type { SettleArgs } from "./settlement.js"

/** A batch in the spool: what the ledger writer commits in one transaction. */
export interface SpooledBatch {
  readonly seq: number
  readonly items: ReadonlyArray<LedgerItem>
  /** Its hooks' rows; undefined when the hooks could not read the store then (they are asked at commit). */
  readonly extra: ReadonlyArray<LedgerRows> | undefined
  /** Its line's length in the file. */
  readonly bytes: number
  /** Epoch ms at which it was spooled (read from the file: when the process read it). */
  readonly at: number
}

/** How much the spool may hold before the gateway refuses new requests (503). */
export interface SpoolBounds {
  readonly maxGenerations: number
  readonly maxBytes: number
}

/** An entry as the file holds it: the broadcast's references (live objects, functions) left out; the hook rows already hold what they read. */
const storedEntry = (entry: GenerationEntry): GenerationEntry => {
  if (entry.broadcast === undefined) return entry
  const { broadcast: _references, ...rest } = entry
  return rest
}

/** A settlement as the file holds it: the budget slice by its id (its lease's callback is this process's). */
const storedSettlement = (s: SettleArgs): SettleArgs => (s.slice === undefined ? s : { ...s, slice: { id: s.slice.id, release: noRelease } })
const noRelease = () => undefined

interface StoredLine {
  readonly s?: number
  readonly a?: number
  readonly i?: ReadonlyArray<{ readonly entry: GenerationEntry; readonly settlement?: SettleArgs }>
  readonly x?: ReadonlyArray<LedgerRows>
}

const lineOf = (seq: number, items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows> | undefined): string =>
  `${JSON.stringify({
    s: seq,
    i: items.map((item) =>
      item.settlement === undefined ? { entry: storedEntry(item.entry) } : { entry: storedEntry(item.entry), settlement: storedSettlement(item.settlement) },
    ),
    x: extra,
  })}\n`

/** A settlement read back: its slice gets a handle whose release does nothing (the unspent part went back when it was first queued). */
const readSettlement = (s: SettleArgs): SettleArgs => (s.slice === undefined ? s : { ...s, slice: { id: s.slice.id, release: noRelease } })

/** Reads the batches a spool file still holds (after its last commit mark). */
export const readSpoolFile = (path: string): Array<SpooledBatch> => {
  // Only a regular file holds batches (not there yet: none).
  if (statSync(path, { throwIfNoEntry: false })?.isFile() !== true) return []
  const text = readFileSync(path, "utf8")
  const batches: Array<SpooledBatch> = []
  const now = Date.now()
  let committed = -1
  for (const line of text.split("\n")) {
    if (line === "") continue
    let parsed: StoredLine
    try {
      parsed = JSON.parse(line) as StoredLine
    } catch {
      // A line a crash cut short: its append never reported durable, so nothing waited on it.
      continue
    }
    if (typeof parsed.a === "number") committed = Math.max(committed, parsed.a)
    else if (typeof parsed.s === "number" && Array.isArray(parsed.i)) {
      const items = parsed.i.map((i): LedgerItem => (i.settlement === undefined ? { entry: i.entry } : { entry: i.entry, settlement: readSettlement(i.settlement) }))
      batches.push({ seq: parsed.s, items, extra: parsed.x, bytes: Buffer.byteLength(line) + 1, at: now })
    }
  }
  return batches.filter((b) => b.seq > committed)
}

export interface LedgerSpool {
  /** The batches not yet committed, oldest first. */
  readonly batches: () => ReadonlyArray<SpooledBatch>
  /** Adds a batch; resolves once it is on disk (fsync'd), rejects when the file cannot take it. */
  readonly append: (items: ReadonlyArray<LedgerItem>, extra: ReadonlyArray<LedgerRows> | undefined) => Promise<void>
  /** It holds batches, or appends are on their way to disk: the ledger writer spools what comes next, in order. */
  readonly busy: () => boolean
  /** The oldest `n` batches are committed: they leave the spool (and the file once it is empty). */
  readonly committed: (n: number) => Promise<void>
  readonly generations: () => number
  readonly bytes: () => number
  /** Seconds since the oldest batch was spooled (0 when empty). */
  readonly ageSeconds: () => number
  /** At or past its bound: new requests are refused until it drains. */
  readonly full: () => boolean
  readonly close: () => Promise<void>
}

/**
 * The spool of one process: `path` is its file (undefined: memory only, for an in-memory
 * database, which a restart loses anyway), read at once when it exists.
 */
export const openSpool = (path: string | undefined, bounds: SpoolBounds): LedgerSpool => {
  const list: Array<SpooledBatch> = path === undefined ? [] : readSpoolFile(path)
  let seq = list.reduce((m, b) => Math.max(m, b.seq), 0)
  let generations = list.reduce((n, b) => n + b.items.length, 0)
  let bytes = list.reduce((n, b) => n + b.bytes, 0)
  let handle: FileHandle | undefined
  /** Lines waiting for the next group write, and who waits for them. */
  let queued: Array<string> = []
  let waiters: Array<{ resolve: () => void; reject: (e: unknown) => void }> = []
  let writing: Promise<void> | undefined
  /** Set when the file was emptied: the next group write removes it instead (unless lines came meanwhile). */
  let emptied = false
  /** Appends not yet on disk (or failed): while any is, the ledger writer keeps spooling, in order. */
  let appending = 0
  /** The last batch committed (for the mark written when the file could not be removed). */
  let lastCommitted = 0

  const writeGroup = async (): Promise<void> => {
    while (queued.length > 0 || emptied) {
      const lines = queued
      const told = waiters
      queued = []
      waiters = []
      try {
        if (path === undefined) {
          emptied = false
          for (const w of told) w.resolve()
          continue
        }
        if (emptied && lines.length === 0) {
          emptied = false
          await handle?.close()
          handle = undefined
          await unlink(path).catch(() => undefined)
          continue
        }
        if (emptied) {
          // Emptied, then appended to before the file could go: the mark keeps the committed batches from being read again.
          emptied = false
          lines.unshift(`${JSON.stringify({ a: lastCommitted })}\n`)
        }
        if (handle === undefined) {
          mkdirSync(dirname(path), { recursive: true })
          handle = await open(path, "a")
        }
        await handle.write(lines.join(""))
        await handle.datasync()
        for (const w of told) w.resolve()
      } catch (e) {
        for (const w of told) w.reject(e)
        // The handle may be what failed (a read-only or full disk): a new one is opened next time.
        await handle?.close().catch(() => undefined)
        handle = undefined
      }
    }
  }
  const kick = () => {
    if (writing !== undefined) return
    writing = writeGroup().finally(() => {
      writing = undefined
      if (queued.length > 0 || emptied) kick()
    })
  }
  const enqueueLine = (line: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      queued.push(line)
      waiters.push({ resolve, reject })
      kick()
    })

  return {
    batches: () => list,
    append: (items, extra) => {
      const s = ++seq
      const line = lineOf(s, items, extra)
      const batch: SpooledBatch = { seq: s, items, extra, bytes: Buffer.byteLength(line), at: Date.now() }
      appending++
      return enqueueLine(line).then(
        () => {
          appending--
          // In memory only once on disk: a batch that never reached the file was not spooled (the caller answers with an error).
          list.push(batch)
          list.sort((a, b) => a.seq - b.seq)
          generations += items.length
          bytes += batch.bytes
        },
        (e: unknown) => {
          appending--
          throw e
        },
      )
    },
    busy: () => list.length > 0 || appending > 0,
    committed: (n) => {
      const done = list.splice(0, n)
      for (const b of done) {
        generations -= b.items.length
        bytes -= b.bytes
      }
      const last = done[done.length - 1]
      if (last === undefined) return Promise.resolve()
      lastCommitted = last.seq
      if (list.length === 0 && appending === 0) {
        emptied = true
        kick()
        return writing ?? Promise.resolve()
      }
      // Not fsync'd on its own account: a mark lost to a crash only makes the next start check those batches again.
      return enqueueLine(`${JSON.stringify({ a: last.seq })}\n`).catch(() => undefined)
    },
    generations: () => generations,
    bytes: () => bytes,
    ageSeconds: () => (list.length === 0 ? 0 : (Date.now() - list[0]!.at) / 1000),
    full: () => generations >= bounds.maxGenerations || bytes >= bounds.maxBytes,
    close: async () => {
      while (writing !== undefined) await writing
      await handle?.close().catch(() => undefined)
      handle = undefined
    },
  }
}

/** A spool's file under the data folder: one per instance id (`GATEWAY_INSTANCE_ID`), made safe as a file name. */
export const spoolPathOf = (dataDir: string, instanceId: string): string =>
  join(dataDir, `ledger-spool.${instanceId.replace(/[^A-Za-z0-9._-]/g, "_")}.jsonl`)

/**
 * Takes the batches of other processes' spool files into `spool` (appended: on disk before this
 * returns), then removes those files. For `serve --workers`: a worker that died with batches in
 * its spool leaves a file under a name no later worker has (src/supervisor.ts names each worker
 * anew); its replacement adopts it. A crash between the append and the removal leaves the batches
 * in both files; the replay skips a batch whose generations are already written.
 */
export const adoptSpools = async (spool: LedgerSpool, paths: ReadonlyArray<string>): Promise<number> => {
  let adopted = 0
  for (const path of paths) {
    for (const batch of readSpoolFile(path)) {
      await spool.append(batch.items, batch.extra)
      adopted += batch.items.length
    }
    await unlink(path).catch(() => undefined)
  }
  return adopted
}
