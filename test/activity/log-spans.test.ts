/**
 * One key's and one model's log read along their spans (src/services/Activity.ts, `alongSpans`):
 * pages followed by their cursors give exactly the records that match, newest first, none twice,
 * when spans of later commits reach back into earlier ones (a long request commits with an old
 * id), when a page needs spans of many commits and several rounds of them, and with the other
 * filters (status, model, time range) beside the key, and for two keys whose spans are filed
 * together (hashes that start alike). Records go through the real ledger commit.
 */
import { describe, expect, test } from "bun:test"
import { SqlClient } from "@effect/sql"
import { Effect } from "effect"
import { type GenerationEntry, newGenerationId } from "../../src/domain/generations.js"
import { Auth } from "../../src/services/Auth.js"
import { GenerationStore } from "../../src/services/GenerationStore.js"
import { SPAN_WIDTH_S } from "../../src/store/log-spans.js"
import { useGateway } from "../support/gateway.js"
import { generationEntry } from "../support/generations.js"

const gw = useGateway()
const run = <A>(effect: Effect.Effect<A, unknown, GenerationStore | Auth | SqlClient.SqlClient>) => gw().server.runtime.runPromise(effect)

/** Keys the records name, as rows of the workspace: a log filtered by a key no workspace of the caller has is a 404. */
const keyRows = (hashes: ReadonlyArray<string>, owner: { readonly userId: string; readonly workspaceId: string }) =>
  run(
    Effect.flatMap(SqlClient.SqlClient, (sql) =>
      Effect.forEach(hashes, (hash) => {
        const now = new Date().toISOString()
        return sql`INSERT INTO api_keys (hash, user_id, workspace_id, name, label, created_at, updated_at)
          VALUES (${hash}, ${owner.userId}, ${owner.workspaceId}, ${"spans"}, ${"sk-…"}, ${now}, ${now})`
      }),
    ),
  )

/** One commit of its own for each call: its records' spans are made together. */
const commit = (entries: ReadonlyArray<GenerationEntry>) =>
  run(Effect.flatMap(GenerationStore, (g) => Effect.all(entries.map((e) => g.recordDurable(e)), { concurrency: "unbounded" })))

interface Page {
  readonly data: ReadonlyArray<{ readonly id: string }>
  readonly next_cursor: string | null
}

/** Every page of `query` at `limit` a page, followed by its cursors. */
const allPages = async (query: string, limit: number, key?: string): Promise<Array<string>> => {
  const ids: Array<string> = []
  let cursor: string | null = null
  for (let pages = 0; pages < 500; pages++) {
    const res = await gw().fetch(`/v1/generations?limit=${limit}${query}${cursor === null ? "" : `&cursor=${cursor}`}`, key === undefined ? {} : { key })
    if (res.status !== 200) throw new Error(`${res.status}: ${await res.text()}`)
    const page = (await res.json()) as Page
    ids.push(...page.data.map((g) => g.id))
    cursor = page.next_cursor
    if (cursor === null) return ids
  }
  throw new Error("more than 500 pages")
}

const newestFirst = (entries: ReadonlyArray<GenerationEntry>) => entries.map((e) => e.id).sort().reverse()

describe("one key's and one model's log, along their spans", () => {
  test("pages give every matching record once, newest first, across commits whose spans overlap", async () => {
    const principal = await run(Effect.flatMap(Auth, (a) => a.authenticateSecret(gw().adminKey)).pipe(Effect.orDie))
    const mine = { userId: principal.userId, workspaceId: principal.workspaceId }
    const keyA = "a".repeat(64)
    const keyB = "b".repeat(64)
    await keyRows([keyA, keyB, `${"a".repeat(16)}${"c".repeat(48)}`], mine)
    const start = Math.floor(Date.now() / 1000) - 3 * 86_400
    let n = 0
    const at = (second: number, overrides: Partial<GenerationEntry>): GenerationEntry => {
      n++
      const createdAt = new Date(second * 1000 + (n % 1000)).toISOString()
      return generationEntry({
        ...mine,
        ...overrides,
        id: newGenerationId(second * 1000 + (n % 1000)),
        createdAt,
        status: n % 4 === 0 ? "failed" : "completed",
        ...(n % 4 === 0 ? { error: { message: "x", status: 502, providerName: "fake" } } : {}),
        model: n % 3 === 0 ? "demo/byok" : "demo/echo",
      })
    }
    const all: Array<GenerationEntry> = []
    const add = async (entries: ReadonlyArray<GenerationEntry>) => {
      all.push(...entries)
      await commit(entries)
    }
    // 250 records of each key, 2.5 minutes apart (each its own span: more than one read of spans
    // holds), committed in 6 interleaved groups: every commit's spans lie among the others'.
    const spread = Array.from({ length: 500 }, (_, i) => at(start + Math.floor(i / 2) * (SPAN_WIDTH_S + 30), { keyHash: i % 2 === 0 ? keyA : keyB }))
    for (let g = 0; g < 6; g++) await add(spread.filter((_, i) => i % 6 === g))
    // A dense stretch of key A (one span of 40), then a later commit whose ids fall inside it and
    // around it (long requests committed after), and one that reaches from before it to after it.
    const dense = start + 50 * (SPAN_WIDTH_S + 30) + 7
    await add(Array.from({ length: 40 }, (_, i) => at(dense + i, { keyHash: keyA })))
    await add([at(dense + 3, { keyHash: keyA }), at(dense + 20, { keyHash: keyA }), at(dense + 39, { keyHash: keyB })])
    await add([at(dense - SPAN_WIDTH_S + 1, { keyHash: keyA }), at(dense + 1, { keyHash: keyA }), at(dense + 60, { keyHash: keyA })])

    // A key whose hash starts as key A's: filed under the same spans, never in A's log.
    const keyC = `${"a".repeat(16)}${"c".repeat(48)}`
    await add(Array.from({ length: 30 }, (_, i) => at(start + i * 400 + 3, { keyHash: keyC })))

    const a = all.filter((e) => e.keyHash === keyA)
    for (const limit of [1, 3, 7, 50, 100]) expect([limit, await allPages(`&api_key_hash=${keyA}`, limit)]).toEqual([limit, newestFirst(a)])
    expect(await allPages(`&api_key_hash=${keyB}`, 9)).toEqual(newestFirst(all.filter((e) => e.keyHash === keyB)))
    expect(await allPages(`&api_key_hash=${keyC}`, 8)).toEqual(newestFirst(all.filter((e) => e.keyHash === keyC)))
    // Filters beside the key: they pass few of its records, so a page takes several rounds of spans.
    expect(await allPages(`&api_key_hash=${keyA}&status=failed`, 5)).toEqual(newestFirst(a.filter((e) => e.status === "failed")))
    expect(await allPages(`&api_key_hash=${keyA}&model=demo/byok`, 4)).toEqual(newestFirst(a.filter((e) => e.model === "demo/byok")))
    // A model alone reads the model's spans.
    expect(await allPages("&model=demo/byok", 11)).toEqual(newestFirst(all.filter((e) => e.model === "demo/byok")))
    // A time range: its ends cut spans.
    const from = new Date((dense - 200) * 1000).toISOString()
    const to = new Date((dense + 30) * 1000).toISOString()
    const inRange = (e: GenerationEntry) => e.createdAt >= from && e.createdAt < to
    expect(await allPages(`&api_key_hash=${keyA}&from=${from}&to=${to}`, 6)).toEqual(newestFirst(a.filter(inRange)))
  }, 60_000)
})
