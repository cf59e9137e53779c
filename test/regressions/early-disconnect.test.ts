/**
 * Regression (found in review): route.ts attaches its abort listener to `req.signal` only AFTER reading the body and
 * running `prepare` (line ~176). A client that disconnects before that point has already aborted
 * the signal; `addEventListener("abort")` on an aborted signal never fires, so the upstream call
 * is made and runs to completion for nobody, and is billed as a normal completed generation.
 * (Bun does set `req.signal.aborted` for a client that went away before the handler returned.)
 *
 * Reproduces on Postgres (run with GATEWAY_TEST_PG_URL=postgres://postgres@127.0.0.1:5432/postgres):
 * `prepare` awaits real I/O there, so the socket close is processed before the listener is added.
 * On SQLite `prepare` never yields to the event loop, the close is seen later and the test passes.
 */
import { describe, expect, test } from "bun:test"
import { useGateway } from "../support/gateway.js"
import { ledgerRowsOf } from "../support/generations.js"

const gw = useGateway(process.env.REVIEW_LOG ? { logLevel: "info" } : {})

describe("client gone before the handler subscribed to req.signal", () => {
  test("the (slow) upstream call is not made, or is recorded as cancelled", async () => {
    const made = (await (await gw().fetch("/v1/keys", { method: "POST", json: { name: "early", limit: 100 } })).json()) as {
      key: string
      data: { hash: string }
    }
    // The client (another process) sends 50 000 small input items (1.7 MB): decoding them in
    // `prepare` takes ~200 ms; it closes the connection 30 ms after its last byte, i.e. during `prepare`.
    const port = gw().server.port
    const client = Bun.spawn([process.execPath, `${import.meta.dir}/early-disconnect-client.ts`, String(port), made.key, process.env.CLOSE_MS ?? "30"])
    await client.exited
    await Bun.sleep(2500)
    await gw().server.drain()
    const rows = await ledgerRowsOf(gw().server, made.data.hash)
    // The non-streamed fake with [slow:100] spends ~800 ms inside `open`; a client that is gone
    // should abort it (status "cancelled") or skip it, never be billed for a completed answer.
    expect(rows.filter((r) => r.status === "completed")).toEqual([])
  })
})
