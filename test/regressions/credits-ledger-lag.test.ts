/**
 * Regression (found in review): the credit check (Spend.reserve) computes the balance from the `spend` LEDGER, but the
 * ledger row is written later by the group-commit writer (GenerationStore), while `settle`
 * releases `credits_reserved_nano` at once. Between the two, a finished request's cost is counted
 * nowhere: concurrent requests are admitted against credits that are already spent, far past the
 * "one reservation" bound (docs/operations.md, "Budget leases").
 */
import { expect, test } from "bun:test"
import { Effect } from "effect"
import { demoCatalog } from "../../src/config/Config.js"
import { PROMPT_FRAMING_TOKENS } from "../../src/pipeline/bounds.js"
import { KeyStore } from "../../src/services/KeyStore.js"
import { startInProcessGateway } from "../support/gateway.js"

const BODY = { model: "demo/echo", input: "hi there", max_output_tokens: 3, provider: { order: ["fake"] } }
const ACTUAL = (2 * 1 + 3 * 2) / 1e6
// The prompt's UTF-8 bytes and the framing allowance, and 3 output tokens, at the dearest candidate's price (fake-backup).
const RESERVATION = ((Buffer.byteLength(JSON.stringify(BODY)) + PROMPT_FRAMING_TOKENS) * 1.5 + 3 * 3) / 1e6

test("credits for ~10 requests: 300 concurrent requests overspend by far more than one reservation", async () => {
  const g = await startInProcessGateway({ catalog: { ...demoCatalog, credits: { enforce: true } }, creditsEnforced: true })
  try {
    const me = (await (await g.fetch("/v1/key")).json()) as { data: { creator_user_id: string } }
    const granted = RESERVATION * 10
    await g.server.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.addCredits(me.data.creator_user_id, granted)))
    const results = await Promise.all(
      Array.from({ length: 300 }, () => g.fetch("/v1/responses", { method: "POST", json: BODY })),
    )
    await Promise.all(results.map((r) => r.text()))
    const ok = results.filter((r) => r.status === 200).length
    await g.server.drain()
    const balance = await g.server.runtime.runPromise(Effect.flatMap(KeyStore, (k) => k.credits(me.data.creator_user_id)))
    // Never past the balance by more than one request's reservation.
    expect(balance.total_usage).toBeLessThanOrEqual(granted + RESERVATION + 1e-12)
    expect(ok).toBeGreaterThan(0)
    expect(balance.total_usage).toBeCloseTo(ok * ACTUAL, 12)
  } finally {
    await g.stop()
  }
})
