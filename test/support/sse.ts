/** Reads a server-sent event stream as the client sees it: events, comments and the [DONE] sentinel. */
export interface ClientEvent {
  readonly event: string | undefined
  readonly data: string
  readonly json: Record<string, unknown> | undefined
}

export const parseSse = (text: string): { events: Array<ClientEvent>; comments: Array<string> } => {
  const events: Array<ClientEvent> = []
  const comments: Array<string> = []
  for (const block of text.split("\n\n")) {
    if (block.trim() === "") continue
    let event: string | undefined
    const data: Array<string> = []
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) comments.push(line.slice(1).trim())
      else if (line.startsWith("event: ")) event = line.slice(7)
      else if (line.startsWith("data: ")) data.push(line.slice(6))
    }
    if (data.length === 0) continue
    const joined = data.join("\n")
    let json: Record<string, unknown> | undefined
    try {
      json = joined === "[DONE]" ? undefined : (JSON.parse(joined) as Record<string, unknown>)
    } catch {
      json = undefined
    }
    events.push({ event, data: joined, json })
  }
  return { events, comments }
}

/** The `type`s of the JSON events, in order, then "[DONE]" if present. */
export const typesOf = (events: ReadonlyArray<ClientEvent>) =>
  events.map((e) => (e.data === "[DONE]" ? "[DONE]" : String(e.json?.type)))

/** Checks the ordering rules strict clients apply; throws with the reason. */
export const checkStreamRules = (events: ReadonlyArray<ClientEvent>) => {
  const lifecycle = events.filter((e) => e.data !== "[DONE]" && e.json?.type !== "debug")
  if (lifecycle[0]?.json?.type !== "response.created") throw new Error(`first event is ${lifecycle[0]?.json?.type}`)
  lifecycle.forEach((e, i) => {
    if (e.json?.sequence_number !== i) throw new Error(`event ${i} has sequence_number ${e.json?.sequence_number}`)
    if (e.event !== e.json?.type) throw new Error(`event line ${e.event} differs from type ${e.json?.type}`)
  })
  const added = new Map<string, number>()
  const doneItems = new Set<string>()
  let nextIndex = 0
  for (const e of lifecycle) {
    const j = e.json!
    if (j.type === "response.output_item.added") {
      const item = j.item as { id: string }
      if (j.output_index !== nextIndex) throw new Error(`output_index ${j.output_index} skips (expected ${nextIndex})`)
      nextIndex++
      added.set(item.id, j.output_index as number)
    } else if (j.type === "response.output_item.done") {
      doneItems.add((j.item as { id: string }).id)
    } else if (typeof j.item_id === "string" && !added.has(j.item_id)) {
      throw new Error(`${j.type} names unknown item ${j.item_id}`)
    }
  }
  for (const id of added.keys()) if (!doneItems.has(id)) throw new Error(`item ${id} added but never done`)
  if (events[events.length - 1]?.data !== "[DONE]") throw new Error("the stream does not end with [DONE]")
}

/**
 * The event types of a Responses stream whose answer is one text item of `deltas` deltas, in
 * wire-compat's order (test/responses/assembler.test.ts spells it out), ending with `end`.
 */
export const textAnswerTypes = (deltas: number, end: "response.completed" | "response.failed" = "response.completed"): Array<string> => [
  "response.created",
  "response.in_progress",
  "response.output_item.added",
  "response.content_part.added",
  ...Array<string>(deltas).fill("response.output_text.delta"),
  "response.output_text.done",
  "response.content_part.done",
  "response.output_item.done",
  end,
]
