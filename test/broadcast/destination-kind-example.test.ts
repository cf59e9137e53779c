/**
 * The worked example of docs/architecture.md ("Worked example: a destination kind") is a kind that
 * works as written: its code block, written as a module beside the registry's kinds (so its
 * relative imports resolve) and given to a gateway with the registry's kinds, takes a destination
 * of its kind (config validated, its secret masked) and delivers a generation to a loopback receiver.
 */
import { afterAll, beforeAll, describe, expect } from "bun:test"
import { Effect, Either } from "effect"
import type { DestinationKind } from "../../src/broadcast/exporter.js"
import { DESTINATION_KINDS } from "../../src/broadcast/exporters/index.js"
import { TEST_BROADCAST } from "../../src/config/Config.js"
import { Destinations } from "../../src/services/Destinations.js"
import { typeProblems, writeDocExample } from "../support/doc-example.js"
import { type InProcessGateway, startInProcessGateway } from "../support/gateway.js"
import { ask, setBroadcast, startReceiver, TIMEOUT_MS, test, waitFor } from "./support.js"

// Beside the registry's kinds, so its relative imports resolve as a kind's do; removed after the file's tests.
let example: ReturnType<typeof writeDocExample>
let kind: DestinationKind
let gw: InProcessGateway & { stop: () => Promise<void> }
const receiver = startReceiver()

beforeAll(async () => {
  example = writeDocExample(import.meta.path, "src/broadcast/exporters")
  const loaded = (await import(example.file)) as Record<string, unknown>
  const kinds = Object.values(loaded).filter((v): v is DestinationKind => typeof (v as Partial<DestinationKind>)?.deliver === "function")
  if (kinds.length !== 1) throw new Error(`the example exports ${kinds.length} kinds, not one`)
  kind = kinds[0] as DestinationKind
  // The registry's list plus the example: what its line in DESTINATION_KINDS does.
  gw = await startInProcessGateway(
    { allowPrivateAddresses: true, broadcast: { ...TEST_BROADCAST, pollMs: 50, retryBaseMs: 100 } },
    { destinationKinds: [...DESTINATION_KINDS, kind] },
  )
  await setBroadcast(gw, true)
}, TIMEOUT_MS)

afterAll(async () => {
  example?.remove()
  await gw?.stop()
  receiver.stop()
})

/** The admin key's user and workspace: the caller the service acts for. */
const caller = async () => {
  const current = (await (await gw.fetch("/v1/key")).json()) as { data: { creator_user_id: string; workspace_id: string } }
  return { userId: current.data.creator_user_id, workspaceId: current.data.workspace_id }
}

/** Through the service: the API's `type` lists the registry's kinds, which the example is not one of. */
const create = async (config: Record<string, unknown>) => {
  const who = await caller()
  return gw.server.runtime.runPromise(
    Effect.either(Effect.flatMap(Destinations, (d) => d.create(who, { name: "example", type: kind.kind, config }))),
  )
}

describe("the worked example of a destination kind (docs/architecture.md)", () => {
  test("it is the jsonl kind the doc describes", () => {
    expect(kind.kind).toBe("jsonl")
    expect(kind.secretFields).toEqual(["token"])
  })

  // Bun runs it without checking its types: the compiler does, as it does every kind of the registry.
  test("it compiles under the project's compiler settings", () => {
    expect(typeProblems(example.file)).toEqual([])
  }, 60_000)

  test("its config is validated by its Schema: a missing url and an unknown key are 400s naming the key", async () => {
    const missing = await create({ token: "tok-0123456789" })
    expect(Either.isLeft(missing) && missing.left.message).toBe("Invalid request: config.url: is missing")
    const unknown = await create({ url: `${receiver.url}/ingest`, colour: "red" })
    expect(Either.isLeft(unknown) && unknown.left.message).toBe("Invalid request: config.colour: unknown key")
  })

  test("a destination of its kind shows its token masked and gets a generation as one JSON line with the bearer token", async () => {
    const made = await create({ url: `${receiver.url}/ingest`, token: "tok-0123456789" })
    if (Either.isLeft(made)) throw new Error(`create: ${made.left.message}`)
    expect(made.right.type).toBe("jsonl")
    expect(made.right.config).toEqual({ url: `${receiver.url}/ingest`, token: "****" })

    const generation = await ask(gw, { input: "hello jsonl" })
    await waitFor(() => receiver.received.some((r) => r.body.includes(generation)), 10_000, `generation ${generation} at the receiver`)
    const request = receiver.received.find((r) => r.body.includes(generation))
    expect(request?.method).toBe("POST")
    expect(request?.path).toBe("/ingest")
    expect(request?.headers.get("authorization")).toBe("Bearer tok-0123456789")
    expect(request?.headers.get("content-type")).toBe("application/x-ndjson")
    const line = (request?.body ?? "").split("\n").map((l) => JSON.parse(l) as { id: string; model: string }).find((l) => l.id === generation)
    expect(line?.model).toBe("demo/free")
  })
})
