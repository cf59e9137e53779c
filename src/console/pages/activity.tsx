/**
 * Activity: spend, requests and tokens per day, by model, provider and key, errors by status and
 * latency percentiles per provider, all from `GET /v1/activity/summary` (the rollup, never the log).
 */
import { useMemo } from "preact/hooks"
import { call, daysBefore, int, query, type Summary, today, usd, type Workspace, callAll } from "../api.js"
import { DayChart } from "../chart.js"
import type { PageProps } from "../session.js"
import { Alert, Bar, Empty, Field, Loading, Section, Table, useLoad } from "../ui.js"

const RANGES = [
  { days: 7, label: "Last 7 days" },
  { days: 30, label: "Last 30 days" },
  { days: 90, label: "Last 90 days" },
] as const

export const ActivityPage = ({ session, params, navigate }: PageProps) => {
  const days = Number(params.get("days") ?? "30")
  const workspace = params.get("workspace_id") ?? ""
  const to = today()
  const from = daysBefore(to, Math.max(1, days) - 1)
  const [summary] = useLoad(
    (signal) => call<Summary>(`/v1/activity/summary${query({ from, to, workspace_id: workspace })}`, { signal }),
    [from, to, workspace],
  )
  const [workspaces] = useLoad(
    (signal) => (session.management ? callAll<Workspace>("/v1/workspaces", { signal }) : Promise.resolve({ data: [] })),
    [session.management],
  )
  const set = (name: string, value: string) => {
    const next = new URLSearchParams(params)
    if (value === "") next.delete(name)
    else next.set(name, value)
    navigate(`/console/activity${next.size > 0 ? `?${next}` : ""}`)
  }

  return (
    <div class="page">
      <form class="filters" aria-label="Activity range" onSubmit={(e) => e.preventDefault()}>
        <Field label="Time range" name="range" error={null}>
          {(id) => (
            <select id={id} value={String(days)} onChange={(e) => set("days", e.currentTarget.value)}>
              {RANGES.map((r) => (
                <option key={r.days} value={String(r.days)}>
                  {r.label}
                </option>
              ))}
            </select>
          )}
        </Field>
        {session.management ? (
          <Field label="Workspace" name="workspace_id" error={null}>
            {(id) => (
              <select id={id} value={workspace} onChange={(e) => set("workspace_id", e.currentTarget.value)}>
                <option value="">All workspaces</option>
                {workspaces.state === "ready"
                  ? workspaces.data.data.map((w) => (
                      <option key={w.id} value={w.id}>
                        {w.name}
                      </option>
                    ))
                  : null}
              </select>
            )}
          </Field>
        ) : (
          <p class="note">An inference key sees its own usage only.</p>
        )}
      </form>
      {summary.state === "loading" ? <Loading what="activity" /> : null}
      {summary.state === "error" ? <Alert error={summary.error} /> : null}
      {summary.state === "ready" ? <Report data={summary.data.data} /> : null}
    </div>
  )
}

/** The range's report: totals, the daily charts, and the breakdowns by model, provider, key and status. */
const Report = ({ data }: { data: Summary["data"] }) => {
  if (data.totals.requests === 0) {
    return (
      <Empty>
        No requests from {data.from} to {data.to}. Send one from the Playground, or with any client, and it appears here.
      </Empty>
    )
  }
  return (
    <>
      <Totals totals={data.totals} />
      <Charts data={data} />
      <div class="grid2">
        <ByModel rows={data.by_model} />
        <ByProvider rows={data.by_provider} />
        <ByKey rows={data.by_key} />
        <ErrorsByStatus rows={data.errors_by_status} />
      </div>
    </>
  )
}

const Totals = ({ totals: t }: { totals: Summary["data"]["totals"] }) => (
  <dl class="totals" aria-label="Totals">
    <div>
      <dt>Spend</dt>
      <dd>{usd(t.usage + t.byok_usage)}</dd>
    </div>
    <div>
      <dt>Requests</dt>
      <dd>{int(t.requests)}</dd>
    </div>
    <div>
      <dt>Tokens</dt>
      <dd>{int(t.prompt_tokens + t.completion_tokens)}</dd>
    </div>
    <div>
      <dt>Errors</dt>
      <dd>{int(t.errors)}</dd>
    </div>
  </dl>
)

/** Spend, requests with errors, and tokens per day. */
const Charts = ({ data }: { data: Summary["data"] }) => {
  const days = useMemo(() => data.days.map((d) => d.date), [data])
  const spend = useMemo(
    () => [
      { label: "Spend (USD)", values: data.days.map((d) => d.usage + d.byok_usage), color: "#2563eb", format: (n: number) => usd(n), axis: (n: number) => `$${Number(n.toPrecision(2))}` },
    ],
    [data],
  )
  const volume = useMemo(
    () => [
      { label: "Requests", values: data.days.map((d) => d.requests), color: "#059669", bars: true, format: int },
      { label: "Errors", values: data.days.map((d) => d.errors), color: "#dc2626", bars: true, format: int },
    ],
    [data],
  )
  const tokens = useMemo(
    () => [
      { label: "Prompt tokens", values: data.days.map((d) => d.prompt_tokens), color: "#7c3aed", format: int },
      { label: "Completion tokens", values: data.days.map((d) => d.completion_tokens), color: "#d97706", format: int },
    ],
    [data],
  )
  return (
    <div class="charts">
      <DayChart title="Spend" days={days} series={spend} />
      <DayChart title="Requests" days={days} series={volume} />
      <DayChart title="Tokens" days={days} series={tokens} />
    </div>
  )
}

const ByModel = ({ rows }: { rows: Summary["data"]["by_model"] }) => {
  const max = Math.max(...rows.map((m) => m.usage + m.byok_usage), 0)
  return (
    <Section title="By model">
      <Table columns={["Model", "Requests", "Tokens", "Spend"]}>
        {rows.map((m) => (
          <tr key={m.model}>
            <td>{m.model}</td>
            <td class="num">{int(m.requests)}</td>
            <td class="num">{int(m.prompt_tokens + m.completion_tokens)}</td>
            <td class="num">
              {usd(m.usage + m.byok_usage)} <Bar value={m.usage + m.byok_usage} max={max} label={`${m.model}: ${usd(m.usage + m.byok_usage)}`} />
            </td>
          </tr>
        ))}
      </Table>
    </Section>
  )
}

const ByProvider = ({ rows }: { rows: Summary["data"]["by_provider"] }) => {
  const max = Math.max(...rows.map((m) => m.requests), 0)
  return (
    <Section title="By provider">
      <Table columns={["Provider", "Requests", "Spend", "Latency p50", "Latency p99"]}>
        {rows.map((p) => (
          <tr key={p.provider_name}>
            <td>{p.provider_name}</td>
            <td class="num">
              {int(p.requests)} <Bar value={p.requests} max={max} label={`${p.provider_name}: ${p.requests} requests`} />
            </td>
            <td class="num">{usd(p.usage + p.byok_usage)}</td>
            <td class="num">{p.latency_p50_ms === null ? "—" : `≤ ${p.latency_p50_ms} ms`}</td>
            <td class="num">{p.latency_p99_ms === null ? "—" : `≤ ${p.latency_p99_ms} ms`}</td>
          </tr>
        ))}
      </Table>
    </Section>
  )
}

const ByKey = ({ rows }: { rows: Summary["data"]["by_key"] }) => {
  const max = Math.max(...rows.map((m) => m.usage + m.byok_usage), 0)
  return (
    <Section title="By key">
      <Table columns={["Key", "Requests", "Spend"]}>
        {rows.map((k) => (
          <tr key={k.api_key_hash}>
            <td title={k.api_key_hash}>{k.name ?? `${k.api_key_hash.slice(0, 12)}…`}</td>
            <td class="num">{int(k.requests)}</td>
            <td class="num">
              {usd(k.usage + k.byok_usage)} <Bar value={k.usage + k.byok_usage} max={max} label={`${k.name ?? k.api_key_hash}: ${usd(k.usage + k.byok_usage)}`} />
            </td>
          </tr>
        ))}
      </Table>
    </Section>
  )
}

const ErrorsByStatus = ({ rows }: { rows: Summary["data"]["errors_by_status"] }) => {
  const max = Math.max(...rows.map((m) => m.count), 0)
  return (
    <Section title="Errors by status">
      {rows.length === 0 ? (
        <Empty>No errors in this range.</Empty>
      ) : (
        <Table columns={["Status", "Requests"]}>
          {rows.map((s) => (
            <tr key={s.status}>
              <td>{s.status}</td>
              <td class="num">
                {int(s.count)} <Bar value={s.count} max={max} label={`status ${s.status}: ${s.count}`} />
              </td>
            </tr>
          ))}
        </Table>
      )}
    </Section>
  )
}
