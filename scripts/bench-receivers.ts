/**
 * The three loopback receivers of scripts/bench-broadcast.ts, in a process of their own. Each
 * takes OTLP JSON bodies and counts the generations (root spans, by `gen_ai.response.id`) it is
 * sent, and how often each. They run apart from the load generator because reading a body is a
 * `JSON.parse` of up to ~700 KB (a few ms): in the load generator's process that stalled its
 * event loop, so the broadcasting gateway's requests were sent late and its latency read high
 * (on the same core as a process of their own they are preempted when the load generator wakes,
 * as a vendor's ingest would not share a client's event loop at all).
 *
 * Prints one line, `{"ports":[a,b,c]}`, once listening; `GET /counts` on any of them answers
 * `{"sizes":[…],"duplicates":[…]}` (generations seen by each, and how many were seen again).
 *   bun scripts/bench-receivers.ts
 */

type Attributes = ReadonlyArray<{ readonly key: string; readonly value: { readonly stringValue?: string } }>
interface OtlpBody {
  readonly resourceSpans: ReadonlyArray<{ readonly scopeSpans: ReadonlyArray<{ readonly spans: ReadonlyArray<{ readonly attributes: Attributes }> }> }>
}

const seen = [new Map<string, number>(), new Map<string, number>(), new Map<string, number>()]

/** Generations seen by each receiver, and how many of them came more than once. */
const counts = () => ({
  sizes: seen.map((ids) => ids.size),
  duplicates: seen.map((ids) => [...ids.values()].reduce((n, k) => n + k - 1, 0)),
})

const receivers = seen.map((ids) =>
  Bun.serve({
    port: 0,
    hostname: "127.0.0.1",
    fetch: async (req) => {
      if (req.method === "GET") return Response.json(counts())
      const body = (await req.json()) as OtlpBody
      for (const r of body.resourceSpans) {
        for (const s of r.scopeSpans) {
          for (const span of s.spans) {
            // An attempt's span carries the generation's id too: only the root span counts.
            if (span.attributes.some((a) => a.key === "gateway.attempt.index")) continue
            const id = span.attributes.find((a) => a.key === "gen_ai.response.id")?.value.stringValue
            if (id !== undefined) ids.set(id, (ids.get(id) ?? 0) + 1)
          }
        }
      }
      return new Response("{}")
    },
  }),
)

console.log(JSON.stringify({ ports: receivers.map((r) => r.port) }))
process.on("SIGTERM", () => {
  for (const r of receivers) r.stop(true)
  process.exit(0)
})
