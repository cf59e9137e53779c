/**
 * A SQLite file's checkpoints off the request thread (src/store/checkpoints.ts): this thread's
 * connections keep the write-ahead log (their mark is the backstop's), and the checkpointer
 * Worker copies it into the file past SQLite's own mark, or once a shorter log has been quiet.
 */
import { afterEach, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { mkdtempSync, readdirSync, readlinkSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { BACKSTOP_AUTOCHECKPOINT, type Checkpoints, startCheckpoints } from "../../src/store/checkpoints.js"

const dirs: Array<string> = []
const open: Array<Checkpoints> = []
afterEach(() => {
  for (const c of open.splice(0)) c.stop()
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true })
})

/** A WAL database whose connection keeps the log as the gateway's do, with a table of 4 KB rows. */
const database = () => {
  const dir = mkdtempSync(join(tmpdir(), "gw-checkpoints-"))
  dirs.push(dir)
  const file = join(dir, "gateway.db")
  const db = new Database(file, { create: true, readwrite: true, strict: true })
  db.run("PRAGMA journal_mode = WAL")
  db.run("PRAGMA synchronous = NORMAL")
  db.run(`PRAGMA wal_autocheckpoint = ${BACKSTOP_AUTOCHECKPOINT}`)
  db.run("CREATE TABLE rows (id INTEGER PRIMARY KEY, body BLOB NOT NULL)")
  const insert = db.prepare<unknown, [Uint8Array]>("INSERT INTO rows (body) VALUES (?)")
  /** `n` rows of 4 KB, a transaction of 10 each (each a page or more of the log). */
  const write = (n: number) => {
    const many = db.transaction((count: number) => {
      for (let i = 0; i < count; i++) insert.run(crypto.getRandomValues(new Uint8Array(4096)))
    })
    for (let i = 0; i < n; i += 10) many(Math.min(10, n - i))
  }
  return { file, db, write }
}

const until = async (what: () => boolean, ms: number) => {
  for (const end = Date.now() + ms; !what() && Date.now() < end; ) await Bun.sleep(20)
  return what()
}

describe("SQLite checkpoints off the request thread", () => {
  test("this thread's commits leave the log to the Worker, which copies it into the file past 1,000 frames", async () => {
    const { file, db, write } = database()
    // ~1,500 pages: past SQLite's own mark, under the backstop's. Nothing checkpoints on this connection.
    write(750)
    const before = statSync(file).size
    expect(before).toBeLessThan(64 * 1024)
    const errors: Array<string> = []
    const checkpoints = startCheckpoints(file, (m) => errors.push(m), { pollMs: 20, idleMs: 60_000 })
    open.push(checkpoints)
    expect(await until(() => checkpoints.done() > 0, 5_000)).toBe(true)
    // The rows are in the file now, and the log's frames all copied (no reader held them back).
    expect(statSync(file).size).toBeGreaterThan(750 * 4096)
    expect(checkpoints.last()?.checkpointed).toBe(checkpoints.last()?.log)
    expect(db.query<{ n: number }, []>("SELECT count(*) AS n FROM rows").get()?.n).toBe(750)
    expect(errors).toEqual([])
    db.close()
  }, 10_000)

  test("a shorter log waits for the quiet time, then is copied too", async () => {
    const { file, db, write } = database()
    const errors: Array<string> = []
    const checkpoints = startCheckpoints(file, (m) => errors.push(m), { pollMs: 20, idleMs: 400 })
    open.push(checkpoints)
    write(20)
    await Bun.sleep(200)
    // Under the mark and not quiet for long enough yet: nothing copied.
    expect(checkpoints.done()).toBe(0)
    expect(await until(() => checkpoints.done() > 0, 5_000)).toBe(true)
    expect(statSync(file).size).toBeGreaterThan(20 * 4096)
    expect(errors).toEqual([])
    db.close()
  }, 10_000)

  test("a Worker that dies is started again, and checkpoints; the Workers leave no descriptor of the log's index open", async () => {
    const { file, db, write } = database()
    write(10)
    // Descriptors of the log's index (SQLite keeps one a process, shared by its connections, and
    // may keep a closed connection's database descriptor for its locks: those are not counted).
    const descriptors = () =>
      readdirSync("/proc/self/fd").filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === `${file}-shm`
        } catch {
          return false
        }
      }).length
    const before = descriptors()
    const checkpoints = startCheckpoints(file, () => undefined, { pollMs: 20, idleMs: 60_000 })
    open.push(checkpoints)
    await Bun.sleep(100)
    checkpoints.kill()
    await Bun.sleep(50)
    write(750)
    expect(await until(() => checkpoints.done() > 0, 5_000)).toBe(true)
    expect(checkpoints.starts()).toBe(2)
    checkpoints.stop()
    expect(await until(() => descriptors() <= before, 2_000)).toBe(true)
    db.close()
  }, 10_000)
})
