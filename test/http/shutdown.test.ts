/**
 * Graceful shutdown of the real server process (`bun src/main.ts serve`): SIGTERM stops new
 * connections, lets an open stream finish, makes its generation record durable and exits 0; a
 * stream still open at GATEWAY_SHUTDOWN_GRACE_MS gets `response.failed` (server_shutting_down)
 * and [DONE], then its connection is closed; it is recorded as cancelled. The record
 * is read afterwards by a new connection to the database (a file for SQLite, or Postgres).
 */
import { afterAll, describe, expect, test } from "bun:test"
import { Database } from "bun:sqlite"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { SQL } from "bun"
import { freshDatabase, pgBaseUrl, sqliteFileDatabase, type TestDatabase } from "../support/db.js"

const root = join(import.meta.dir, "..", "..")
const KEY = `sk-test-shutdown-${crypto.randomUUID().replaceAll("-", "")}`
const dbs: Array<TestDatabase> = []
/** The servers' data folder (the secret key file they create): removed after, like the databases. */
const dataDir = mkdtempSync(join(tmpdir(), "gw-shutdown-data-"))
afterAll(async () => {
  for (const db of dbs) await db.drop()
  rmSync(dataDir, { recursive: true, force: true })
})

/** A database that outlives the server process. */
const database = async (): Promise<TestDatabase> => {
  const db = pgBaseUrl !== undefined ? await freshDatabase() : sqliteFileDatabase("gw-shutdown")
  dbs.push(db)
  return db
}

interface Served {
  readonly proc: ReturnType<typeof Bun.spawn>
  readonly url: string
  /** Everything the process printed on stdout so far. */
  readonly stdout: () => string
}

/** Starts `bun src/main.ts serve` on a free port and waits for its "listening" line. */
const serve = async (databaseUrl: string, env: Record<string, string> = {}): Promise<Served> => {
  const proc = Bun.spawn([process.execPath, "src/main.ts", "serve"], {
    cwd: root,
    env: {
      ...process.env,
      PORT: "0",
      HOST: "127.0.0.1",
      DATABASE_URL: databaseUrl,
      GATEWAY_DATA_DIR: dataDir,
      GATEWAY_MANAGEMENT_KEY: KEY,
      GATEWAY_LOG_LEVEL: "info",
      ...env,
    },
    stdout: "pipe",
    stderr: "inherit",
  })
  let out = ""
  const decoder = new TextDecoder()
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no listening line: ${out}`)), 20_000)
    void (async () => {
      for (;;) {
        const { done, value } = await reader.read()
        if (done) break
        out += decoder.decode(value, { stream: true })
        const match = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(out)
        if (match !== null) {
          clearTimeout(timer)
          resolve(match[1])
        }
      }
    })()
  })
  return { proc, url, stdout: () => out }
}

const startStream = (url: string, input: string) =>
  fetch(`${url}/v1/responses`, {
    method: "POST",
    headers: { "content-type": "application/json", authorization: `Bearer ${KEY}` },
    body: JSON.stringify({ model: "demo/echo", input, stream: true, provider: { order: ["fake"] } }),
  })

/** Reads a stream to its end; the text, or what arrived before the connection dropped. */
const readAll = async (res: Response) => {
  const reader = res.body!.getReader()
  const decoder = new TextDecoder()
  let text = ""
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      text += decoder.decode(value, { stream: true })
    }
  } catch {
    // A cut stream ends with a dropped connection.
  }
  return text
}

/** The generation row, read by a new connection after the server process has exited. */
const generationRow = async (databaseUrl: string, id: string) => {
  if (databaseUrl.startsWith("postgres")) {
    const sql = new SQL(databaseUrl)
    try {
      const rows = await sql`SELECT status, streamed FROM generations WHERE id = ${id}`
      return rows[0] as { status: string; streamed: number } | undefined
    } finally {
      await sql.close()
    }
  }
  const db = new Database(databaseUrl, { readonly: true })
  try {
    return db.query("SELECT status, streamed FROM generations WHERE id = ?").get(id) as { status: string; streamed: number } | null
  } finally {
    db.close()
  }
}

describe("SIGHUP without --workers", () => {
  test("is ignored with a line saying a reload needs --workers: an open stream finishes, the gateway serves on", async () => {
    const db = await database()
    const server = await serve(db.url)
    try {
      const res = await startStream(server.url, "one two three four five six [slow:120]")
      const body = readAll(res)
      await Bun.sleep(150)
      server.proc.kill("SIGHUP")
      const text = await body
      expect(text).toContain("response.completed")
      expect(text).toEndWith("data: [DONE]\n\n")
      expect((await fetch(`${server.url}/v1/health`)).status).toBe(200)
      expect(server.stdout()).toContain("gateway: SIGHUP ignored: a reload needs serve --workers N")
      // Its management key is the variable's (not "exists already": the database is new).
      expect(server.stdout()).toContain("The management key is GATEWAY_MANAGEMENT_KEY's")
    } finally {
      server.proc.kill("SIGTERM")
      expect(await server.proc.exited).toBe(0)
    }
  }, 30_000)
})

describe("SIGTERM", () => {
  test("an open stream finishes, its generation is written, the process exits 0", async () => {
    const db = await database()
    const server = await serve(db.url)
    const res = await startStream(server.url, "one two three four five six [slow:120]")
    expect(res.status).toBe(200)
    const generationId = res.headers.get("x-generation-id")!
    const body = readAll(res)
    await Bun.sleep(150)
    server.proc.kill("SIGTERM")
    await Bun.sleep(100)
    // No new connections while draining.
    await expect(fetch(`${server.url}/v1/health`)).rejects.toThrow()
    const text = await body
    expect(text).toContain("response.completed")
    expect(text).toEndWith("data: [DONE]\n\n")
    expect(await server.proc.exited).toBe(0)
    const row = await generationRow(db.url, generationId)
    expect(row?.status).toBe("completed")
    expect(Number(row?.streamed)).toBe(1)
    // One JSON line per request on stdout, with its request and generation ids, and no content.
    const line = server
      .stdout()
      .split("\n")
      .filter((l) => l.startsWith("{"))
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l["generation_id"] === generationId)
    expect(line).toMatchObject({ level: "info", msg: "request", route: "/v1/responses", status: 200, stream: true, outcome: "completed" })
    expect(String(line?.["request_id"])).toMatch(/^req_/)
    expect(JSON.stringify(line)).not.toContain("one two three")
  }, 30_000)

  test("a stream still open at the grace deadline ends with response.failed (server_shutting_down) and [DONE], recorded as cancelled", async () => {
    const db = await database()
    const server = await serve(db.url, { GATEWAY_SHUTDOWN_GRACE_MS: "300" })
    const res = await startStream(server.url, "a b c d e f g h i j k l m n o p q r s t [slow:200]")
    const generationId = res.headers.get("x-generation-id")!
    const body = readAll(res)
    await Bun.sleep(100)
    const killedAt = Date.now()
    server.proc.kill("SIGTERM")
    const text = await body
    // A terminal event before the connection closes, not a reset mid-stream.
    expect(text).not.toContain("response.completed")
    const failed = /event: response\.failed\ndata: (.*)\n\n/.exec(text)
    expect(failed).not.toBeNull()
    const event = JSON.parse(failed?.[1] ?? "{}") as { response: { status: string; error: { code: string } } }
    expect(event.response.status).toBe("failed")
    expect(event.response.error.code).toBe("server_shutting_down")
    expect(text).toEndWith("data: [DONE]\n\n")
    expect(await server.proc.exited).toBe(0)
    expect(Date.now() - killedAt).toBeLessThan(5_000)
    const row = await generationRow(db.url, generationId)
    expect(row?.status).toBe("cancelled")
    expect(server.stdout()).toContain("1 request(s) cut at the deadline")
  }, 30_000)
})
