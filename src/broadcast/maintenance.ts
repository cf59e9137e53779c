/**
 * The delivery engine's maintenance, every few seconds: the cap on pending generations per
 * destination and the cap on the pending batches' bytes in all (the oldest dropped, counted), the
 * retention of delivered and dead rows (and the batches no row needs any more), and the queue's
 * gauges for `/metrics`.
 */
import { Effect } from "effect"
import { now as clockNow } from "../clock.js"
import { count, type EngineState } from "./engine-state.js"
import { forget } from "./row-outcomes.js"

/** Caps per destination (the oldest pending batches dropped), retention, and the queue gauges. */
export const maintain = async (state: EngineState) => {
  const { sql, run, settings } = state.deps
  const now = clockNow()
  const over = await run(
    sql<{ destination_id: string; n: number; type: string }>`SELECT b.destination_id, SUM(b.generations) AS n, d.type
      FROM broadcast_deliveries b JOIN observability_destinations d ON d.id = b.destination_id
      WHERE b.state = 'pending' GROUP BY b.destination_id, d.type
      HAVING SUM(b.generations) > ${settings.maxPendingPerDestination}`.pipe(Effect.orDie),
  )
  for (const o of over) {
    // The oldest go first: whole rows, then the first generations of the row that straddles the cap.
    let excess = Number(o.n) - settings.maxPendingPerDestination
    while (excess > 0) {
      const oldest = await run(
        sql<{ batch_id: string; generations: number }>`SELECT batch_id, generations FROM broadcast_deliveries
          WHERE destination_id = ${o.destination_id} AND state = 'pending' AND claimed_until < ${now}
          ORDER BY created_at LIMIT 100`.pipe(Effect.orDie),
      )
      if (oldest.length === 0) break
      const whole: Array<string> = []
      let dropped = 0
      for (const row of oldest) {
        if (dropped >= excess) break
        const n = Number(row.generations)
        if (dropped + n <= excess) {
          whole.push(row.batch_id)
          dropped += n
          continue
        }
        const part = excess - dropped
        await run(
          sql`UPDATE broadcast_deliveries SET generations = generations - ${part}, dropped = dropped + ${part}
            WHERE batch_id = ${row.batch_id} AND destination_id = ${o.destination_id}`.pipe(Effect.orDie),
        )
        dropped += part
        break
      }
      await forget(state, o.destination_id, whole)
      count(state, o.type, "dropped", dropped)
      excess -= dropped
    }
  }
  await capPendingBytes(state, now)
  // Retention: finished rows go, and with them the batches no row needs any more.
  for (;;) {
    const expired = await run(
      sql<{ batch_id: string }>`SELECT DISTINCT batch_id FROM broadcast_deliveries WHERE state IN ('delivered', 'dead')
        AND finished_at < ${now - settings.retentionMs} LIMIT 500`.pipe(Effect.orDie),
    )
    if (expired.length === 0) break
    const ids = expired.map((r) => r.batch_id)
    await run(
      Effect.all([
        sql`DELETE FROM broadcast_deliveries WHERE batch_id IN ${sql.in(ids)} AND state IN ('delivered', 'dead')
          AND finished_at < ${now - settings.retentionMs}`,
        sql`DELETE FROM broadcast_contents WHERE batch_id IN ${sql.in(ids)}
          AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_contents.batch_id)`,
        sql`DELETE FROM broadcast_batches WHERE id IN ${sql.in(ids)}
          AND NOT EXISTS (SELECT 1 FROM broadcast_deliveries d WHERE d.batch_id = broadcast_batches.id)`,
      ]).pipe(Effect.orDie),
    )
    if (expired.length < 500) break
  }
  const depth = await run(
    sql<{ n: number | null; oldest: number | null }>`SELECT SUM(generations) AS n, MIN(created_at) AS oldest FROM broadcast_deliveries
      WHERE state = 'pending'`.pipe(Effect.orDie),
  )
  state.pendingGauge = Number(depth[0]?.n ?? 0)
  const oldest = depth[0]?.oldest
  state.lagGauge = oldest === null || oldest === undefined ? 0 : Math.max(0, (now - Number(oldest)) / 1000)
  state.deps.onCount?.()
}

/**
 * The pending batches' bytes (items and sealed content, `broadcast_batches.bytes`) kept under
 * `maxPendingBytes`: the oldest batches' pending rows not being sent are dropped for every
 * destination they wait for, counted as dropped per destination kind. Batches written before
 * their size was kept count 0 and are left to the other cap.
 */
const capPendingBytes = async (state: EngineState, now: number) => {
  const { sql, run, settings } = state.deps
  const pending = () =>
    run(
      sql<{ n: number | null }>`SELECT SUM(bytes) AS n FROM broadcast_batches
        WHERE id IN (SELECT batch_id FROM broadcast_deliveries WHERE state = 'pending')`.pipe(Effect.orDie),
    ).then((r) => Number(r[0]?.n ?? 0))
  let excess = (await pending()) - settings.maxPendingBytes
  while (excess > 0) {
    const oldest = await run(
      sql<{ batch_id: string; destination_id: string; generations: number; type: string; bytes: number }>`SELECT d.batch_id,
          d.destination_id, d.generations, o.type, b.bytes
        FROM broadcast_deliveries d JOIN broadcast_batches b ON b.id = d.batch_id
          JOIN observability_destinations o ON o.id = d.destination_id
        WHERE d.state = 'pending' AND d.claimed_until < ${now} AND b.bytes > 0
        ORDER BY b.created_at, d.batch_id LIMIT 500`.pipe(Effect.orDie),
    )
    if (oldest.length === 0) break
    // Whole batches, oldest first: every pending row of a batch goes with it.
    const byDestination = new Map<string, { readonly type: string; readonly batches: Array<string>; dropped: number }>()
    let freed = 0
    let last: string | undefined
    for (const row of oldest) {
      if (row.batch_id !== last) {
        if (freed >= excess) break
        freed += Number(row.bytes)
        last = row.batch_id
      }
      let of = byDestination.get(row.destination_id)
      if (of === undefined) {
        of = { type: row.type, batches: [], dropped: 0 }
        byDestination.set(row.destination_id, of)
      }
      of.batches.push(row.batch_id)
      of.dropped += Number(row.generations)
    }
    for (const [destinationId, of] of byDestination) {
      await forget(state, destinationId, of.batches)
      count(state, of.type, "dropped", of.dropped)
    }
    // Read again: a batch cut by the LIMIT keeps its other rows, and its bytes, until the next pass.
    excess = (await pending()) - settings.maxPendingBytes
  }
}
