/**
 * `ledger.durable_answers`. With it on, an answer's last byte (the JSON body; a
 * stream's terminal event and `[DONE]`) goes out only once its generation record and its
 * settlement are committed, and the writer commits without waiting for a window. Records are read
 * through a second connection of the test's own (not through the gateway, which would flush the
 * queue first), the moment the client holds the last byte. The writer's window is stretched to a
 * minute, so with the flag off the record is certainly still queued then (the old timing), and
 * with it on nothing but the answer itself can have made the writer commit.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { SQL } from "bun"
import { Database } from "bun:sqlite"
import { Layer, Option } from "effect"
import { demoCatalog, GatewayConfig, testSettings } from "../../src/config/Config.js"
import { type RunningServer, startServer } from "../../src/http/server.js"
import { GenerationWriterOptions } from "../../src/services/GenerationStore.js"
import { engine, freshDatabase, type TestDatabase } from "../support/db.js"

/** A connection of the test's own to the gateway's database: it sees committed rows only. */
const openReader = (url: string) => {
  if (engine === "postgres") {
    const pg = new SQL(url)
    return {
      count: async (table: string, where: string, value: string): Promise<number> => {
        const rows = (await pg.unsafe(`SELECT COUNT(*)::int AS n FROM ${table} WHERE ${where} = $1`, [value])) as Array<{ n: number }>
        return Number(rows[0]?.n ?? 0)
      },
      /** The key's spend counted into its limit window (what a settlement adds). */
      windowSpend: async (hash: string): Promise<number> => {
        const rows = (await pg.unsafe("SELECT window_spend_nano AS s FROM api_keys WHERE hash = $1", [hash])) as Array<{ s: number }>
        return Number(rows[0]?.s ?? 0)
      },
      close: () => pg.close(),
    }
  }
  const db = new Database(url, { readonly: true })
  return {
    count: async (table: string, where: string, value: string): Promise<number> => {
      const row = db.query(`SELECT COUNT(*) AS n FROM ${table} WHERE ${where} = ?`).get(value) as { n: number }
      return Number(row.n)
    },
    windowSpend: async (hash: string): Promise<number> => {
      const row = db.query("SELECT window_spend_nano AS s FROM api_keys WHERE hash = ?").get(hash) as { s: number } | null
      return Number(row?.s ?? 0)
    },
    close: async () => db.close(),
  }
}

interface Gateway {
  readonly server: RunningServer
  readonly adminKey: string
  readonly reader: ReturnType<typeof openReader>
  readonly db: TestDatabase
}

const startGateway = async (durableAnswers: boolean): Promise<Gateway> => {
  const db = await freshDatabase()
  const settings = testSettings({ databaseUrl: db.url, durableAnswers, catalog: demoCatalog })
  // A one-minute window: only a commit that the answer itself waits for can land before it ends.
  const writer = Layer.succeed(GenerationWriterOptions, { windowMs: 60_000, maxBatch: 200, retryDelayMs: 1 })
  const config = Layer.merge(GatewayConfig.layer(settings), writer) as Layer.Layer<GatewayConfig>
  const server = await startServer(config)
  return { server, adminKey: Option.getOrThrow(server.createdSecret), reader: openReader(db.url), db }
}

const stopGateway = async (g: Gateway) => {
  await g.server.stop()
  await g.reader.close()
  await g.db.drop()
}

const post = (g: Gateway, path: string, body: unknown, key = g.adminKey) =>
  fetch(`${g.server.url}${path}`, {
    method: "POST",
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: JSON.stringify(body),
  })

const BODY = { model: "demo/echo", input: "durable please", provider: { order: ["fake"] } }

/** Reads a stream until its last event and `[DONE]` are in; the connection may still be open. */
const readToDone = async (res: Response): Promise<string> => {
  const reader = (res.body as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let text = ""
  while (!text.includes("data: [DONE]")) {
    const { done, value } = await reader.read()
    if (done) break
    text += decoder.decode(value, { stream: true })
  }
  return text
}

/** The generation's row and, on a limited key, its reservation, as seen the moment the answer is in. */
const answerAndLook = async (g: Gateway, stream: boolean, key?: string) => {
  const res = await post(g, "/v1/responses", { ...BODY, stream }, key)
  expect(res.status).toBe(200)
  const id = res.headers.get("x-generation-id") ?? ""
  const text = stream ? await readToDone(res) : await res.text()
  // Nothing awaited between the last byte and these reads but the reads themselves.
  // A request's own hold is a row; one admitted against the process's budget slice has
  // none, and its settlement is what counts its cost into the key's window.
  const [records, spend, windowSpend] = await Promise.all([
    g.reader.count("generations", "id", id),
    g.reader.count("reservations", "is_slice = 0 AND key_hash", keyHashOf(key)),
    g.reader.windowSpend(keyHashOf(key)),
  ])
  if (stream) expect(text).toContain("response.completed")
  else expect(JSON.parse(text).status).toBe("completed")
  return { id, records, reservations: spend, windowSpend }
}

const keyHashOf = (secret: string | undefined) => (secret === undefined ? "" : Bun.SHA256.hash(secret, "hex"))

describe(`ledger.durable_answers on (${engine})`, () => {
  let g: Gateway
  let limited: string
  beforeAll(async () => {
    g = await startGateway(true)
    const res = await post(g, "/v1/keys", { name: "limited", limit: 100 })
    limited = ((await res.json()) as { key: string }).key
  })
  afterAll(async () => {
    await stopGateway(g)
  })

  test("a JSON answer's record is committed before its body reaches the client", async () => {
    const seen = await answerAndLook(g, false)
    expect(seen.records).toBe(1)
  })

  test("a stream's record is committed before response.completed and [DONE] reach the client", async () => {
    const seen = await answerAndLook(g, true)
    expect(seen.records).toBe(1)
  })

  test("on a key with a limit, the reservation is settled before the last byte too (JSON and stream)", async () => {
    let counted = 0
    for (const stream of [false, true]) {
      const seen = await answerAndLook(g, stream, limited)
      expect(seen.records).toBe(1)
      expect(seen.reservations).toBe(0)
      expect(seen.windowSpend).toBeGreaterThan(counted)
      counted = seen.windowSpend
    }
  })

  test("a stream that fails mid-way sends response.failed and [DONE] once its record is committed", async () => {
    const res = await post(g, "/v1/responses", { ...BODY, input: "a b c d e [fail-mid]", stream: true })
    const id = res.headers.get("x-generation-id") ?? ""
    const text = await readToDone(res)
    const records = await g.reader.count("generations", "id", id)
    expect(text).toContain("response.failed")
    expect(records).toBe(1)
  })

  test("concurrent answers are all committed before their last bytes (group commit)", async () => {
    const seen = await Promise.all(Array.from({ length: 40 }, (_, i) => answerAndLook(g, i % 2 === 0, i % 4 < 2 ? undefined : limited)))
    expect(seen.filter((s) => s.records !== 1)).toEqual([])
  })
})

describe(`ledger.durable_answers off (${engine})`, () => {
  let g: Gateway
  beforeAll(async () => {
    g = await startGateway(false)
  })
  afterAll(async () => {
    await stopGateway(g)
  })

  test("the answer does not wait: its record is still in the writer's window at the last byte (JSON and stream)", async () => {
    for (const stream of [false, true]) {
      const seen = await answerAndLook(g, stream)
      expect(seen.records).toBe(0)
      // A read through the gateway has the queue written first, as before.
      const read = await fetch(`${g.server.url}/v1/generation?id=${seen.id}`, { headers: { authorization: `Bearer ${g.adminKey}` } })
      expect(read.status).toBe(200)
      expect(await g.reader.count("generations", "id", seen.id)).toBe(1)
    }
  })
})
