/**
 * The bodies a pass sends: the outbox batches its rows point to, read and opened once for every
 * destination they go to; each destination's generations as its filter rules and switches see
 * them; and the OTLP trace requests built from them (src/broadcast/payload.ts), once per pass for
 * every destination with the same switches and generations.
 *
 * Opened batches and built bodies outlive a pass: a batch's destinations are often claimed in
 * different passes (one at its limit of sends in flight is left out of a claim), and each would
 * read, open and build the same generations again. Measured with three destinations (the delivery
 * Worker's wall time by phase, bench-broadcast): building bodies was about half of its work.
 * Bounded, the oldest first out: generations held opened, bytes of bodies held.
 */
import { Effect, Either } from "effect"
import { now as clockNow } from "../clock.js"
import type { ResolvedDestination } from "../services/Destinations.js"
import { type TraceBatch, traceBatch } from "./exporter.js"
import type { ClaimedRow } from "./deliveries.js"
import { count, type EngineState, type OpenedBatch, type Pass } from "./engine-state.js"
import { compileFilter, passAll } from "./filters.js"
import {
  contentsOf,
  type DeliveryContent,
  type DeliveryPayload,
  needsRecord,
  type OutboxItems,
  otlpOf,
  payloadFrom,
  type PayloadRow,
  subjectOf,
  type TraceItem,
  traceItemOf,
  unpackJson,
  type ViewOptions,
} from "./payload.js"
import { forget } from "./row-outcomes.js"

const OPENED_MAX_GENERATIONS = 5_000
const BUILT_MAX_BYTES = 16 * 1024 * 1024

export const optionsOf = (d: ResolvedDestination): ViewOptions => ({
  privacyMode: d.privacy_mode,
  cost: d.broadcast_generation_cost,
  identity: d.broadcast_generation_identity,
  requestContext: d.broadcast_generation_request_context,
})
const optionsKey = (o: ViewOptions) => `${Number(o.privacyMode)}${Number(o.cost)}${Number(o.identity)}${Number(o.requestContext)}`

/** The key's name, from a cache of a minute: a hit answers without a promise (it is asked per generation and destination). */
const keyNameOf = ({ deps: { sql, run }, keyNames }: EngineState, hash: string, now: number): string | null | Promise<string | null> => {
  const hit = keyNames.get(hash)
  if (hit !== undefined && now - hit.at < 60_000) return hit.name
  return run(sql<{ name: string }>`SELECT name FROM api_keys WHERE hash = ${hash}`.pipe(Effect.orDie)).then((rows) => {
    const name = rows[0]?.name ?? null
    keyNames.set(hash, { name, at: clockNow() })
    return name
  })
}

const openContents = (state: EngineState, sealed: string | null): ReadonlyArray<DeliveryContent | null> | undefined => {
  if (sealed === null) return undefined
  const plain = state.deps.open(sealed)
  return Either.isRight(plain) ? contentsOf(JSON.parse(unpackJson(plain.right))) : undefined
}

const keepOpened = (state: EngineState, id: string, batch: OpenedBatch) => {
  const { opened } = state
  if (opened.has(id)) return
  opened.set(id, batch)
  state.openedGenerations += batch.items.generations.length
  for (const [oldest, b] of opened) {
    if (state.openedGenerations <= OPENED_MAX_GENERATIONS) break
    opened.delete(oldest)
    state.openedGenerations -= b.items.generations.length
  }
}

const keepBuilt = (state: EngineState, key: string, batch: TraceBatch) => {
  const { built } = state
  built.set(key, batch)
  state.builtBytes += batch.otlpJson.byteLength
  for (const [oldest, b] of built) {
    if (state.builtBytes <= BUILT_MAX_BYTES) break
    built.delete(oldest)
    state.builtBytes -= b.otlpJson.byteLength
  }
}

/** Reads and opens the batches not held opened already, and the records of their generations (one read for the pass). */
export const loadBatches = async (state: EngineState, all: ReadonlyArray<string>): Promise<ReadonlyMap<string, OpenedBatch>> => {
  const { queue } = state.deps
  const out = new Map<string, OpenedBatch>()
  const ids: Array<string> = []
  for (const id of all) {
    const hit = state.opened.get(id)
    if (hit === undefined) ids.push(id)
    else out.set(id, hit)
  }
  if (ids.length === 0) return out
  const rows = await queue.batches(ids)
  const parsed = rows.map((row) => ({ row, items: JSON.parse(unpackJson(row.items)) as OutboxItems }))
  const wanted: Array<string> = []
  for (const { items } of parsed) for (const g of items.generations) if (needsRecord(g.payload)) wanted.push(g.payload.id)
  const records = new Map<string, PayloadRow>()
  if (wanted.length > 0) for (const r of await queue.records(wanted)) records.set(String(r.id), r)
  for (const { row, items } of parsed) {
    const payloads = items.generations.map(({ payload }) => {
      if (!needsRecord(payload)) return payload as DeliveryPayload
      const record = records.get(payload.id)
      return record === undefined ? undefined : payloadFrom(record, payload)
    })
    const batch: OpenedBatch = { items, payloads, contents: openContents(state, row.content), traced: new Map() }
    out.set(row.id, batch)
    keepOpened(state, row.id, batch)
  }
  return out
}

/** The destination's filter rules, compiled once per version of the destination. */
const filterOf = ({ filters }: EngineState, d: ResolvedDestination) => {
  const hit = filters.get(d.id)
  if (hit !== undefined && hit.version === d.updated_at) return hit.test
  const test = compileFilter(d.filter_rules)
  filters.set(d.id, { version: d.updated_at, test })
  return test
}

/**
 * The generations of `rows` as `destination` sees them (sent at most `batch_size`, about `batch_max_bytes`, at a time);
 * rows whose every generation its filter rules refuse are deleted.
 */
export const itemsOf = async (state: EngineState, destination: ResolvedDestination, rows: ReadonlyArray<ClaimedRow>, pass: Pass) => {
  const test = filterOf(state, destination)
  const options = optionsOf(destination)
  const shape = optionsKey(options)
  const now = clockNow()
  const items: Array<TraceItem> = []
  const kept: Array<ClaimedRow> = []
  const refused: Array<string> = []
  let filtered = 0
  for (const row of rows) {
    const batch = pass.batches.get(row.batch_id)
    const at = batch?.items.destinations.indexOf(destination.id) ?? -1
    let taken = 0
    if (batch !== undefined && at >= 0) {
      const { generations } = batch.items
      let traced = batch.traced.get(shape)
      if (traced === undefined) {
        traced = new Array<TraceItem | undefined>(generations.length)
        batch.traced.set(shape, traced)
      }
      let skip = Number(row.dropped)
      for (let i = 0; i < generations.length; i++) {
        const generation = generations[i]
        if (generation === undefined || !generation.to.includes(at)) continue
        if (skip > 0) {
          skip--
          continue
        }
        const payload = batch.payloads[i]
        // Its record is gone (it is written in the same transaction: not expected); nothing to send.
        if (payload === undefined) continue
        let item = traced[i]
        // The key's name is looked up only to filter or to build: a built item has it.
        if (test !== passAll || item === undefined) {
          const content = options.privacyMode ? undefined : (batch.contents?.[i] ?? undefined)
          const name = keyNameOf(state, payload.keyHash, now)
          const keyName = name instanceof Promise ? await name : name
          if (test !== passAll && !test(subjectOf(payload, content, keyName))) {
            filtered++
            continue
          }
          item ??= traceItemOf(payload, content, options, keyName)
          traced[i] = item
        }
        items.push(item)
        taken++
      }
    }
    if (taken > 0) kept.push(row)
    else refused.push(row.batch_id)
  }
  await forget(state, destination.id, refused)
  count(state, destination.type, "filtered", filtered)
  return { items, kept, options }
}

/** The send's bodies, each built once per pass for every destination with the same switches and generations. */
export const batchesOf = (state: EngineState, items: ReadonlyArray<TraceItem>, options: ViewOptions, pass: Pass): Array<TraceBatch> => {
  const { settings } = state.deps
  const out: Array<TraceBatch> = []
  for (let i = 0; i < items.length; ) {
    // Up to batch_size generations, under batch_max_bytes (a larger generation goes alone).
    let end = i + 1
    let bytes = (items[i] as TraceItem).bytes
    while (end < items.length && end - i < settings.batchSize && bytes + (items[end] as TraceItem).bytes <= settings.batchMaxBytes) {
      bytes += (items[end] as TraceItem).bytes
      end++
    }
    const chunk = items.slice(i, end)
    i = end
    const key = `${optionsKey(options)}\u0000${chunk.map((item) => item.view.id).join(",")}`
    let batch = pass.built.get(key)
    if (batch === undefined) {
      batch = traceBatch(otlpOf(chunk), chunk.map((item) => item.view))
      keepBuilt(state, key, batch)
    }
    out.push(batch)
  }
  return out
}
