/**
 * With `ledger.durable_answers` on, a process crash loses no answered request. The
 * gateway runs as a process of its own (`bun src/main.ts serve`, the flag set in its config file),
 * answers a burst of JSON and streamed requests, and is killed with SIGKILL the moment the last
 * answer is in; the database, read afterwards, holds a generation for every answer. (With the flag
 * off the same run loses the records of the writer's last 25 ms window: the last round's, here.)
 */
import { afterAll, beforeAll, expect, test } from "bun:test"
import { SQL } from "bun"
import { Database } from "bun:sqlite"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { demoCatalog } from "../../src/config/Config.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"
import { untilListening } from "../support/spawned.js"

const root = join(import.meta.dir, "..", "..")
const KEY = `sk-test-durable-${crypto.randomUUID().replaceAll("-", "")}`
let dir: string
let db: TestDatabase
const running: Array<ReturnType<typeof Bun.spawn>> = []

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), "gw-durable-"))
  db = await freshDatabase()
})

afterAll(async () => {
  for (const proc of running) proc.kill("SIGKILL")
  await Promise.all(running.map((p) => p.exited))
  await db?.drop()
  rmSync(dir, { recursive: true, force: true })
})

/** Starts `gateway serve` from the sources; resolves with its process and base URL. */
const start = async (durable: boolean) => {
  const config = join(dir, `config-${durable}.json`)
  writeFileSync(config, JSON.stringify({ ...demoCatalog, ledger: { durable_answers: durable } }))
  const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve"], {
    cwd: dir,
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      GATEWAY_DATA_DIR: dir,
      DATABASE_URL: db.url,
      GATEWAY_CONFIG: config,
      GATEWAY_MANAGEMENT_KEY: KEY,
      GATEWAY_LOG_LEVEL: "none",
    },
    stdout: "pipe",
    stderr: "inherit",
  })
  running.push(proc)
  return { proc, url: await untilListening(proc) }
}

/** One request read to its last byte; resolves with its generation id. */
const answer = async (url: string, i: number): Promise<string> => {
  const stream = i % 2 === 1
  const res = await fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { authorization: `Bearer ${KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ model: "demo/echo", input: `crash test ${i}`, stream, provider: { order: ["fake"] } }),
  })
  const text = await res.text()
  if (res.status !== 200 || (stream && !text.includes("data: [DONE]"))) throw new Error(`request ${i}: ${res.status} ${text.slice(0, 200)}`)
  return res.headers.get("x-generation-id") ?? ""
}

const recordedOf = async (ids: ReadonlyArray<string>): Promise<number> => {
  if (engine === "postgres") {
    const pg = new SQL(db.url)
    try {
      const rows = (await pg.unsafe("SELECT COUNT(*)::int AS n FROM generations WHERE id = ANY($1)", [ids])) as Array<{ n: number }>
      return Number(rows[0]?.n ?? 0)
    } finally {
      await pg.close()
    }
  }
  const sqlite = new Database(db.url, { readonly: true })
  try {
    const row = sqlite.query(`SELECT COUNT(*) AS n FROM generations WHERE id IN (${ids.map(() => "?").join(",")})`).get(...ids) as { n: number }
    return Number(row.n)
  } finally {
    sqlite.close()
  }
}

test("with durable answers on, every request answered before a SIGKILL has its generation record", async () => {
  const { proc, url } = await start(true)
  // Rounds of concurrent requests, so that some commits group several rows.
  const ids: Array<string> = []
  for (let round = 0; round < 3; round++) {
    ids.push(...(await Promise.all(Array.from({ length: 30 }, (_, i) => answer(url, round * 30 + i)))))
  }
  proc.kill("SIGKILL")
  await proc.exited
  expect(ids.length).toBe(90)
  expect(await recordedOf(ids)).toBe(ids.length)
}, 60_000)
