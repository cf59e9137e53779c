/** Models: the catalog with each model's endpoints, prices, context lengths and live health. */
import { useState } from "preact/hooks"
import { call, type Model, usd } from "../api.js"
import type { PageProps } from "../session.js"
import { Alert, Empty, Loading, Section, useLoad } from "../ui.js"

interface Endpoint {
  readonly provider_name: string
  readonly tag: string
  readonly context_length: number
  readonly pricing: { readonly prompt: string; readonly completion: string }
  readonly status: 0 | -1 | -2
  readonly uptime_last_30m: number | null
  readonly uptime_last_1d: number | null
  readonly latency_last_30m: { p50: number; p99: number } | null
  readonly throughput_last_30m: { p50: number; p99: number } | null
}

const perMillion = (perToken: string) => usd(Number(perToken) * 1_000_000)
const STATUS = { 0: "answering", [-1]: "failing", [-2]: "cooling down" } as const

export const ModelsPage = (_: PageProps) => {
  const [models] = useLoad((signal) => call<{ data: Array<Model> }>("/v1/models", { signal }), [])
  const [open, setOpen] = useState<string | null>(null)
  if (models.state === "loading") return <Loading what="models" />
  if (models.state === "error") return <Alert error={models.error} />
  if (models.data.data.length === 0) return <Empty>The catalog has no models.</Empty>
  return (
    <div class="page">
      <div class="table-wrap">
        <table>
          <thead>
            <tr>
              <th scope="col">Model</th>
              <th scope="col">Context</th>
              <th scope="col">Prompt / 1M</th>
              <th scope="col">Completion / 1M</th>
              <th scope="col">Endpoints</th>
            </tr>
          </thead>
          <tbody>
            {models.data.data.map((m) => (
              <tr key={m.id}>
                <td>
                  <b>{m.id}</b>
                  <div class="row-facts">{m.name}</div>
                </td>
                <td class="num">{m.context_length?.toLocaleString("en-US") ?? "—"}</td>
                <td class="num">{perMillion(m.pricing.prompt)}</td>
                <td class="num">{perMillion(m.pricing.completion)}</td>
                <td>
                  <button type="button" class="secondary" aria-expanded={open === m.id} onClick={() => setOpen(open === m.id ? null : m.id)}>
                    {open === m.id ? "Hide" : "Show"} endpoints of {m.id}
                  </button>
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {open !== null ? <Endpoints id={open} /> : null}
    </div>
  )
}

const Endpoints = ({ id }: { id: string }) => {
  const [endpoints] = useLoad(
    (signal) => call<{ data: { endpoints: Array<Endpoint> } }>(`/v1/models/${id.split("/").map(encodeURIComponent).join("/")}/endpoints`, { signal }),
    [id],
  )
  return (
    <Section title={`Endpoints of ${id}`}>
      {endpoints.state === "loading" ? <Loading what="endpoints" /> : null}
      {endpoints.state === "error" ? <Alert error={endpoints.error} /> : null}
      {endpoints.state === "ready" ? (
        <div class="table-wrap">
          <table>
            <thead>
              <tr>
                <th scope="col">Provider</th>
                <th scope="col">Health</th>
                <th scope="col">Uptime 30 min</th>
                <th scope="col">Uptime 1 day</th>
                <th scope="col">Latency p50 / p99</th>
                <th scope="col">Throughput p50</th>
                <th scope="col">Context</th>
                <th scope="col">Prompt / 1M</th>
                <th scope="col">Completion / 1M</th>
              </tr>
            </thead>
            <tbody>
              {endpoints.data.data.endpoints.map((e) => (
                <tr key={e.tag}>
                  <td>{e.provider_name}</td>
                  <td>
                    <span class={`status s${e.status}`}>{STATUS[e.status]}</span>
                  </td>
                  <td class="num">{e.uptime_last_30m === null ? "no traffic" : `${e.uptime_last_30m.toFixed(1)} %`}</td>
                  <td class="num">{e.uptime_last_1d === null ? "no traffic" : `${e.uptime_last_1d.toFixed(1)} %`}</td>
                  <td class="num">{e.latency_last_30m === null ? "—" : `${Math.round(e.latency_last_30m.p50)} / ${Math.round(e.latency_last_30m.p99)} ms`}</td>
                  <td class="num">{e.throughput_last_30m === null ? "—" : `${Math.round(e.throughput_last_30m.p50)} tok/s`}</td>
                  <td class="num">{e.context_length.toLocaleString("en-US")}</td>
                  <td class="num">{perMillion(e.pricing.prompt)}</td>
                  <td class="num">{perMillion(e.pricing.completion)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </Section>
  )
}
