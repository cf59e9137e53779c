/**
 * The outbox's cache of a workspace's destinations (src/broadcast/outbox.ts): while the store is
 * away, the targets last read still decide, so a batch spooled during an outage keeps its outbox
 * rows; a workspace never read fails the hook as the load did (the ledger writer then spools the
 * batch with its hooks still to ask).
 */
import { describe, expect, test } from "bun:test"
import { makeOutbox, type WorkspaceTargets } from "../../src/broadcast/outbox.js"
import type { LedgerRows } from "../../src/store/ledger.js"
import { generationEntry } from "../support/generations.js"

const targets: WorkspaceTargets = {
  enabled: true,
  destinations: [{ id: "dest-1", keyHashes: null, samplingRate: 1, privacyMode: true }],
}

const deliveriesOf = (rows: ReadonlyArray<LedgerRows>) => rows.find((r) => r.table === "broadcast_deliveries")?.rows.map((r) => r["destination_id"]) ?? []

describe("the outbox's targets while the store is away", () => {
  test("a load that fails falls back to the targets last read (also after an invalidation); a workspace never read fails", async () => {
    let away = false
    let loads = 0
    const outbox = makeOutbox({
      load: async (ids) => {
        loads++
        if (away) throw Object.assign(new Error("connect ECONNREFUSED"), { code: "ECONNREFUSED" })
        return new Map(ids.map((id) => [id, targets]))
      },
      seal: (plain) => plain,
    })
    const entry = { ...generationEntry(), workspaceId: "ws-known" }
    expect(deliveriesOf(await outbox.hook([entry]))).toEqual(["dest-1"])
    expect(loads).toBe(1)
    away = true
    // Stale (invalidated): the load is tried, fails, and the last targets decide.
    outbox.invalidate()
    expect(deliveriesOf(await outbox.hook([{ ...entry, id: "gen-2" }]))).toEqual(["dest-1"])
    expect(loads).toBe(2)
    const unknown = { ...generationEntry(), workspaceId: "ws-never-read" }
    await expect(Promise.resolve(outbox.hook([unknown]))).rejects.toThrow("ECONNREFUSED")
  })
})
