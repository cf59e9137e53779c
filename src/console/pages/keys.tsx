/**
 * Keys (management keys): the list with usage and limits; create (the secret shown once, with a
 * copy button); edit the spend limit, its reset and the request rate limit; disable; delete after
 * a confirmation.
 */
import { useState } from "preact/hooks"
import { type ApiKey, call, usd, type Workspace, callAll } from "../api.js"
import type { PageProps } from "../session.js"
import { Alert, Empty, Field, type FormError, FormAlert, formErrorOf, Loading, Section, useLoad } from "../ui.js"

const RESETS = ["", "daily", "weekly", "monthly"] as const

export const ManagementOnly = () => <Empty>This page needs a management key: an inference key sees its own usage under Activity and Logs.</Empty>

/** The keys API answers 100 keys a page (offset paging). */
const KEYS_PAGE = 100

export const KeysPage = ({ session, params, navigate }: PageProps) => {
  const offset = Math.max(0, Number(params.get("offset") ?? "0") || 0)
  // An inference key calls nothing it would be refused.
  const none = Promise.resolve({ data: [] })
  const [keys, reload] = useLoad(
    (signal) => (session.management ? call<{ data: Array<ApiKey> }>(`/v1/keys?include_disabled=true&offset=${offset}`, { signal }) : none),
    [offset],
  )
  const [workspaces] = useLoad(
    (signal) => (session.management ? callAll<Workspace>("/v1/workspaces", { signal }) : none),
    [],
  )
  const [created, setCreated] = useState<{ name: string; secret: string } | null>(null)
  if (!session.management) return <ManagementOnly />
  return (
    <div class="page">
      <Section title="Create a key">
        <CreateKey workspaces={workspaces.state === "ready" ? workspaces.data.data : []} onCreated={(c) => {
            setCreated(c)
            reload()
          }} />
        {created !== null ? <Secret name={created.name} secret={created.secret} onDone={() => setCreated(null)} /> : null}
      </Section>
      <Section title="Keys">
        {keys.state === "loading" ? <Loading what="keys" /> : null}
        {keys.state === "error" ? <Alert error={keys.error} /> : null}
        {keys.state === "ready" && keys.data.data.length === 0 ? <Empty>No keys yet.</Empty> : null}
        {keys.state === "ready" && keys.data.data.length > 0 ? (
          <>
            <ul class="rows">
              {keys.data.data.map((k) => (
                <KeyRow key={k.hash} k={k} onChanged={reload} />
              ))}
            </ul>
            <nav class="pager" aria-label="Pages of keys">
              <button type="button" class="secondary" disabled={offset === 0} onClick={() => navigate(`/console/keys?offset=${Math.max(0, offset - KEYS_PAGE)}`)}>
                Previous {KEYS_PAGE}
              </button>
              <button
                type="button"
                class="secondary"
                disabled={keys.data.data.length < KEYS_PAGE}
                onClick={() => navigate(`/console/keys?offset=${offset + KEYS_PAGE}`)}
              >
                Next {KEYS_PAGE}
              </button>
            </nav>
          </>
        ) : null}
      </Section>
    </div>
  )
}

const CreateKey = ({ workspaces, onCreated }: { workspaces: ReadonlyArray<Workspace>; onCreated: (c: { name: string; secret: string }) => void }) => {
  const [name, setName] = useState("")
  const [limit, setLimit] = useState("")
  const [reset, setReset] = useState("")
  const [workspace, setWorkspace] = useState("")
  const [management, setManagement] = useState(false)
  const [error, setError] = useState<FormError | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event) => {
    e.preventDefault()
    setBusy(true)
    setError(null)
    try {
      const body: Record<string, unknown> = { name }
      if (limit.trim() !== "") body.limit = Number(limit)
      if (reset !== "") body.limit_reset = reset
      if (workspace !== "") body.workspace_id = workspace
      if (management) body.is_management_key = true
      const res = await call<{ key: string; data: ApiKey }>("/v1/keys", { method: "POST", json: body })
      onCreated({ name: res.data.name, secret: res.key })
      setName("")
      setLimit("")
    } catch (err) {
      setError(formErrorOf(err))
    } finally {
      setBusy(false)
    }
  }
  return (
    <form class="form-grid" onSubmit={submit} aria-label="Create a key">
      <Field label="Name" name="name" error={error}>
        {(id, d, invalid) => <input id={id} value={name} required aria-describedby={d} aria-invalid={invalid} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <Field label="Spend limit (USD)" name="limit" error={error} hint="Empty: no limit">
        {(id, d, invalid) => (
          <input id={id} inputMode="decimal" value={limit} aria-describedby={d} aria-invalid={invalid} onInput={(e) => setLimit(e.currentTarget.value)} />
        )}
      </Field>
      <Field label="Limit resets" name="limit_reset" error={error}>
        {(id, d) => (
          <select id={id} value={reset} aria-describedby={d} onChange={(e) => setReset(e.currentTarget.value)}>
            {RESETS.map((r) => (
              <option key={r} value={r}>
                {r === "" ? "never" : r}
              </option>
            ))}
          </select>
        )}
      </Field>
      <Field label="Workspace" name="workspace_id" error={error}>
        {(id, d) => (
          <select id={id} value={workspace} aria-describedby={d} onChange={(e) => setWorkspace(e.currentTarget.value)}>
            <option value="">My default workspace</option>
            {workspaces.map((w) => (
              <option key={w.id} value={w.id}>
                {w.name}
              </option>
            ))}
          </select>
        )}
      </Field>
      <div class="field check">
        <label>
          <input type="checkbox" checked={management} onChange={(e) => setManagement(e.currentTarget.checked)} /> Management key
        </label>
      </div>
      <FormAlert error={error} fields={["name", "limit", "limit_reset", "workspace_id"]} />
      <div class="actions">
        <button type="submit" disabled={busy}>
          {busy ? "Creating…" : "Create key"}
        </button>
      </div>
    </form>
  )
}

const Secret = ({ name, secret, onDone }: { name: string; secret: string; onDone: () => void }) => {
  const [copied, setCopied] = useState<string | null>(null)
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(secret)
      setCopied("Copied")
    } catch {
      setCopied("Copy failed: select the key and copy it")
    }
  }
  return (
    <section class="secret" aria-label="New key">
      <p>
        The key <b>{name}</b>. It is shown only now: copy it somewhere safe.
      </p>
      <code class="secret-value">{secret}</code>
      <div class="actions">
        <button type="button" onClick={copy}>
          Copy key
        </button>
        <button type="button" class="secondary" onClick={onDone}>
          Done
        </button>
        <span role="status">{copied}</span>
      </div>
    </section>
  )
}

const KeyRow = ({ k, onChanged }: { k: ApiKey; onChanged: () => void }) => {
  const [editing, setEditing] = useState(false)
  const [confirming, setConfirming] = useState(false)
  const [limit, setLimit] = useState(k.limit === null ? "" : String(k.limit))
  const [reset, setReset] = useState(k.limit_reset ?? "")
  const [rateRequests, setRateRequests] = useState(k.rate_limit === null ? "" : String(k.rate_limit.requests))
  const [rateInterval, setRateInterval] = useState(k.rate_limit?.interval ?? "1m")
  const [error, setError] = useState<FormError | null>(null)
  const patch = async (body: Record<string, unknown>) => {
    setError(null)
    try {
      await call(`/v1/keys/${encodeURIComponent(k.hash)}`, { method: "PATCH", json: body })
      setEditing(false)
      onChanged()
    } catch (err) {
      setError(formErrorOf(err))
    }
  }
  const remove = async () => {
    try {
      await call(`/v1/keys/${encodeURIComponent(k.hash)}`, { method: "DELETE" })
      onChanged()
    } catch (err) {
      setError(formErrorOf(err))
    }
  }
  return (
    <li class="row" aria-label={`Key ${k.name}`}>
      <div class="row-main">
        <b>{k.name}</b> <code>{k.label}</code> {k.is_management_key ? <span class="tag">management</span> : null}
        {k.disabled ? <span class="tag off">disabled</span> : null}
        <div class="row-facts">
          Usage {usd(k.usage)} (today {usd(k.usage_daily)}, this month {usd(k.usage_monthly)}) · Limit{" "}
          {k.limit === null ? "none" : `${usd(k.limit)}${k.limit_reset ? ` ${k.limit_reset}` : ""}, ${usd(k.limit_remaining)} left`} · Rate{" "}
          {k.rate_limit === null ? "no limit" : `${k.rate_limit.requests} per ${k.rate_limit.interval}`}
        </div>
      </div>
      <div class="actions">
        <button type="button" class="secondary" onClick={() => setEditing(!editing)} aria-expanded={editing}>
          Edit limit
        </button>
        <button type="button" class="secondary" onClick={() => patch({ disabled: !k.disabled })}>
          {k.disabled ? "Enable" : "Disable"}
        </button>
        <button type="button" class="danger" onClick={() => setConfirming(true)}>
          Delete
        </button>
      </div>
      {editing ? (
        <form
          class="form-grid"
          aria-label={`Limit of ${k.name}`}
          onSubmit={(e) => {
            e.preventDefault()
            patch({
              limit: limit.trim() === "" ? null : Number(limit),
              limit_reset: reset === "" ? null : reset,
              rate_limit: rateRequests.trim() === "" ? null : { requests: Number(rateRequests), interval: rateInterval.trim() },
            })
          }}
        >
          <Field label="Spend limit (USD)" name="limit" error={error} hint="Empty: no limit">
            {(id, d, invalid) => <input id={id} inputMode="decimal" value={limit} aria-describedby={d} aria-invalid={invalid} onInput={(e) => setLimit(e.currentTarget.value)} />}
          </Field>
          <Field label="Limit resets" name="limit_reset" error={error}>
            {(id) => (
              <select id={id} value={reset} onChange={(e) => setReset(e.currentTarget.value)}>
                {RESETS.map((r) => (
                  <option key={r} value={r}>
                    {r === "" ? "never" : r}
                  </option>
                ))}
              </select>
            )}
          </Field>
          <Field label="Rate limit (requests)" name="rate_limit.requests" error={error} hint="Empty: no rate limit">
            {(id, d, invalid) => (
              <input id={id} inputMode="numeric" value={rateRequests} aria-describedby={d} aria-invalid={invalid} onInput={(e) => setRateRequests(e.currentTarget.value)} />
            )}
          </Field>
          <Field label="Per interval" name="rate_limit.interval" error={error} hint="10s, 1m, 1h or 1d">
            {(id, d, invalid) => (
              <input id={id} value={rateInterval} aria-describedby={d} aria-invalid={invalid} onInput={(e) => setRateInterval(e.currentTarget.value)} />
            )}
          </Field>
          <div class="actions">
            <button type="submit">Save limit</button>
          </div>
        </form>
      ) : null}
      {confirming ? (
        <div class="confirm" role="alertdialog" aria-label={`Delete ${k.name}?`}>
          <p>Delete the key {k.name}? Requests with it are refused at once; this cannot be undone.</p>
          <button type="button" class="danger" onClick={remove}>
            Delete {k.name}
          </button>
          <button type="button" class="secondary" onClick={() => setConfirming(false)}>
            Cancel
          </button>
        </div>
      ) : null}
      <FormAlert error={error} fields={editing ? ["limit", "limit_reset", "rate_limit.requests", "rate_limit.interval"] : []} />
    </li>
  )
}
