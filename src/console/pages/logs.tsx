/**
 * Logs: the generation log newest first (`GET /v1/generations`, keyset pages), its filters, and a
 * record's detail (`GET /v1/generation`, and its stored prompt and completion when the workspace
 * logs content). The filters and the open record live in the query string.
 */
import { useState } from "preact/hooks"
import { ApiError, call, type Generation, int, query, usd } from "../api.js"
import type { PageProps } from "../session.js"
import { Alert, Empty, Field, type FormError, FormAlert, Loading, Section, useLoad } from "../ui.js"

const FILTERS = ["from", "to", "model", "provider", "api_key_hash", "status", "session_id", "min_cost"] as const
type Filter = (typeof FILTERS)[number]

interface Page {
  readonly data: ReadonlyArray<Generation>
  readonly next_cursor: string | null
}

const LABELS: Record<Filter, string> = {
  from: "From (UTC)",
  to: "To (UTC)",
  model: "Model",
  provider: "Provider",
  api_key_hash: "Key hash",
  status: "Status",
  session_id: "Session id",
  min_cost: "Min cost (USD)",
}

export const LogsPage = ({ session, params, navigate }: PageProps) => {
  const open = params.get("id")
  const applied = Object.fromEntries(FILTERS.map((f) => [f, params.get(f) ?? ""])) as Record<Filter, string>
  const cursor = params.get("cursor") ?? ""
  const [draft, setDraft] = useState(applied)
  const [page] = useLoad(
    (signal) => call<Page>(`/v1/generations${query({ ...applied, cursor, limit: 50 })}`, { signal }),
    [params.toString()],
  )
  /** The cursors of the pages before this one (Previous goes back through them). */
  const back = params.get("back")?.split(",").filter(Boolean) ?? []
  const go = (next: Record<string, string>) => navigate(`/console/logs${query(next)}`)
  const filterError: FormError | null =
    page.state === "error" && page.error instanceof ApiError
      ? page.error.status === 403 && /another key/.test(page.error.message)
        ? { field: "api_key_hash", message: `You cannot see this key's logs: ${page.error.message}` }
        : { field: page.error.field, message: page.error.message }
      : null

  if (open !== null) return <Detail id={open} management={session.management} onClose={() => go({ ...applied, cursor, back: back.join(",") })} />
  return (
    <div class="page">
      <form
        class="filters"
        aria-label="Log filters"
        onSubmit={(e) => {
          e.preventDefault()
          go(draft)
        }}
      >
        {FILTERS.map((f) => (
          <Field key={f} label={LABELS[f]} name={f} error={filterError}>
            {(id, describedBy, invalid) =>
              f === "status" ? (
                <select id={id} value={draft.status} aria-describedby={describedBy} onChange={(e) => setDraft({ ...draft, status: e.currentTarget.value })}>
                  <option value="">Any</option>
                  {["completed", "incomplete", "failed", "cancelled"].map((s) => (
                    <option key={s} value={s}>
                      {s}
                    </option>
                  ))}
                </select>
              ) : (
                <input
                  id={id}
                  type={(f === "from" || f === "to" ? "date" : "text") as "text"}
                  inputMode={f === "min_cost" ? "decimal" : undefined}
                  value={draft[f]}
                  aria-describedby={describedBy}
                  aria-invalid={invalid}
                  onInput={(e) => setDraft({ ...draft, [f]: e.currentTarget.value })}
                />
              )
            }
          </Field>
        ))}
        <div class="actions">
          <button type="submit">Apply filters</button>
          <button
            type="button"
            class="secondary"
            onClick={() => {
              setDraft(Object.fromEntries(FILTERS.map((f) => [f, ""])) as Record<Filter, string>)
              go({})
            }}
          >
            Clear
          </button>
        </div>
      </form>
      <FormAlert error={filterError} fields={FILTERS} />
      {page.state === "loading" ? <Loading what="generations" /> : null}
      {page.state === "error" && filterError === null ? <Alert error={page.error} /> : null}
      {page.state === "ready" ? (
        page.data.data.length === 0 ? (
          <Empty>No generations match. Requests appear here as soon as they are answered.</Empty>
        ) : (
          <>
            <div class="table-wrap">
              <table class="logs">
                <caption class="sr-only">Generations, newest first</caption>
                <thead>
                  <tr>
                    <th scope="col">Time (UTC)</th>
                    <th scope="col">Model</th>
                    <th scope="col">Provider</th>
                    <th scope="col">Status</th>
                    <th scope="col">Tokens</th>
                    <th scope="col">Cost</th>
                    <th scope="col">Latency</th>
                    <th scope="col">Detail</th>
                  </tr>
                </thead>
                <tbody>
                  {page.data.data.map((g) => (
                    <tr key={g.id}>
                      <td>{g.created_at.replace("T", " ").slice(0, 19)}</td>
                      <td>{g.model}</td>
                      <td>{g.provider_name}</td>
                      <td>
                        <span class={`status ${g.status}`}>{g.status}</span>
                      </td>
                      <td class="num">
                        {int(g.tokens_prompt)} → {int(g.tokens_completion)}
                      </td>
                      <td class="num">{usd(g.total_cost)}</td>
                      <td class="num">{g.latency === null ? "—" : `${g.latency} ms`}</td>
                      <td>
                        <a href={`/console/logs${query({ ...applied, cursor, back: back.join(","), id: g.id })}`} aria-label={`Open ${g.id}`}>
                          Open
                        </a>
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
            </div>
            <nav class="pager" aria-label="Pages">
              <button type="button" class="secondary" disabled={cursor === ""} onClick={() => go({ ...applied })}>
                Newest
              </button>
              <button
                type="button"
                class="secondary"
                disabled={cursor === ""}
                onClick={() => go({ ...applied, cursor: back[back.length - 1] ?? "", back: back.slice(0, -1).join(",") })}
              >
                Previous page
              </button>
              <button
                type="button"
                disabled={page.data.next_cursor === null}
                onClick={() => go({ ...applied, cursor: page.data.next_cursor ?? "", back: [...back, cursor].join(",") })}
              >
                Next page
              </button>
            </nav>
          </>
        )
      ) : null}
    </div>
  )
}

interface Content {
  readonly data: {
    readonly input: { readonly messages: ReadonlyArray<{ role: string; content: string }> } | { readonly prompt: string }
    readonly output: { readonly completion: string | null; readonly reasoning: string | null }
    readonly error: {
      readonly message: string
      readonly status: number
      readonly provider_name: string | null
      readonly previous_errors: ReadonlyArray<{ code: number | string | null; message: string; provider_name: string | null }>
    } | null
  }
}

const Row = ({ k, v }: { k: string; v: string | number | null | undefined }) => (
  <div>
    <dt>{k}</dt>
    <dd>{v === null || v === undefined || v === "" ? "—" : String(v)}</dd>
  </div>
)

const Detail = ({ id, management, onClose }: { id: string; management: boolean; onClose: () => void }) => {
  const [gen] = useLoad((signal) => call<{ data: Generation }>(`/v1/generation${query({ id })}`, { signal }), [id])
  // Asked only when stored and readable (content is for management keys): nothing the API would refuse.
  const wanted = management && gen.state === "ready" && gen.data.data.has_content
  const [content] = useLoad(
    (signal): Promise<Content | string> =>
      wanted
        ? call<Content>(`/v1/generation/content${query({ id })}`, { signal })
        : Promise.resolve(
            management
              ? "Not stored: the workspace does not log prompts and completions (Workspaces, Log prompts and completions)."
              : "Prompts and completions are shown to management keys only.",
          ),
    [id, wanted],
  )
  return (
    <div class="page">
      <p>
        <button type="button" class="secondary" onClick={onClose}>
          Back to the log
        </button>
      </p>
      {gen.state === "loading" ? <Loading what="the generation" /> : null}
      {gen.state === "error" ? <Alert error={gen.error} /> : null}
      {gen.state === "ready" ? (
        <div class="grid2">
          <Section title={`Generation ${gen.data.data.id}`}>
            <dl class="facts">
              <Row k="Created (UTC)" v={gen.data.data.created_at} />
              <Row k="Model" v={gen.data.data.model} />
              <Row k="Provider" v={gen.data.data.provider_name} />
              <Row k="Upstream model" v={gen.data.data.upstream_model} />
              <Row k="Status" v={gen.data.data.status} />
              <Row k="Finish reason" v={gen.data.data.finish_reason} />
              <Row k="Key hash" v={gen.data.data.api_key_hash} />
              <Row k="Session id" v={gen.data.data.session_id} />
              <Row k="App" v={gen.data.data.app_name} />
              <Row k="Router" v={gen.data.data.router} />
              <Row k="Parent generation" v={gen.data.data.parent_generation_id} />
            </dl>
          </Section>
          <Section title="Request parameters">
            <dl class="facts">
              <Row k="Streamed" v={gen.data.data.streamed ? "yes" : "no"} />
              <Row k="Cancelled" v={gen.data.data.cancelled ? "yes" : "no"} />
              <Row k="Referer" v={gen.data.data.http_referer} />
              <Row k="User agent" v={gen.data.data.user_agent} />
              <Row k="Web search results" v={gen.data.data.num_search_results} />
              <Row k="Pages fetched" v={gen.data.data.num_fetches} />
              <Row k="Search engine" v={gen.data.data.web_search_engine} />
            </dl>
          </Section>
          <Section title="Cost breakdown">
            <dl class="facts">
              <Row k="Total cost" v={usd(gen.data.data.total_cost)} />
              <Row k="Paid with" v={gen.data.data.is_byok ? "your provider key (BYOK)" : "credits"} />
              <Row k="Prompt tokens" v={int(gen.data.data.tokens_prompt)} />
              <Row k="Cached prompt tokens" v={int(gen.data.data.native_tokens_cached)} />
              <Row k="Cache write tokens" v={int(gen.data.data.native_tokens_cache_write)} />
              <Row k="Completion tokens" v={int(gen.data.data.tokens_completion)} />
              <Row k="Reasoning tokens" v={int(gen.data.data.native_tokens_reasoning)} />
              <Row k="Counts" v={gen.data.data.usage_estimated ? "estimated by the gateway" : "reported by the provider"} />
            </dl>
          </Section>
          <Section title="Timings">
            <dl class="facts">
              <Row k="Time to first token" v={gen.data.data.latency === null ? null : `${gen.data.data.latency} ms`} />
              <Row k="Whole request" v={`${gen.data.data.generation_time} ms`} />
            </dl>
          </Section>
          <Section title="Attempts">
            {content.state === "ready" && typeof content.data !== "string" && content.data.data.error !== null ? (
              <ol>
                {content.data.data.error.previous_errors.map((a, i) => (
                  <li key={i}>
                    {a.provider_name ?? "?"}: {String(a.code)} {a.message}
                  </li>
                ))}
                <li>
                  {content.data.data.error.provider_name ?? "?"}: {content.data.data.error.status} {content.data.data.error.message}
                </li>
              </ol>
            ) : (
              <p>
                {gen.data.data.status === "failed" ? "Failed at" : "Answered by"} {gen.data.data.provider_name}
                {gen.data.data.status === "failed" ? "" : " (the earlier attempts of a fallback are kept with the stored content)"}.
              </p>
            )}
          </Section>
          <Section title="Prompt and completion">
            {content.state === "loading" ? <Loading what="the content" /> : null}
            {content.state === "error" ? <Alert error={content.error} /> : null}
            {content.state === "ready" && typeof content.data === "string" ? <Empty>{content.data}</Empty> : null}
            {content.state === "ready" && typeof content.data !== "string" ? (
              <div class="content">
                <h3>Prompt</h3>
                {"messages" in content.data.data.input ? (
                  content.data.data.input.messages.map((m, i) => (
                    <pre key={i}>
                      <b>{m.role}:</b> {m.content}
                    </pre>
                  ))
                ) : (
                  <pre>{content.data.data.input.prompt}</pre>
                )}
                <h3>Completion</h3>
                <pre>{content.data.data.output.completion ?? "—"}</pre>
                {content.data.data.output.reasoning ? (
                  <>
                    <h3>Reasoning</h3>
                    <pre>{content.data.data.output.reasoning}</pre>
                  </>
                ) : null}
              </div>
            ) : null}
          </Section>
        </div>
      ) : null}
    </div>
  )
}
