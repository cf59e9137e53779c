/**
 * Destinations (management keys): the list with delivery status (pending, dead, last error),
 * create and edit every kind with its config form (secrets write-only: never shown, sent only
 * when typed), "Send test" and "Redeliver dead".
 */
import { useState } from "preact/hooks"
import { call, callAll } from "../api.js"
import { destinationKinds } from "../destination-kinds.js" with { type: "macro" }
import type { PageProps } from "../session.js"
import { Alert, Empty, Field, type FormError, FormAlert, formErrorOf, Loading, Section, useLoad } from "../ui.js"
import { ManagementOnly } from "./keys.js"

// Derived from the server's schemas when the console is bundled (a macro: plain data here).
const KINDS = destinationKinds()

interface Destination {
  readonly id: string
  readonly name: string
  readonly type: string
  readonly enabled: boolean
  readonly sampling_rate: number
  readonly config: Record<string, unknown>
  readonly delivery?: { last_success_at: string | null; last_error: string | null; last_error_at: string | null; pending: number; dead: number }
}

export const DestinationsPage = ({ session, params, navigate }: PageProps) => {
  const [list, reload] = useLoad(
    (signal) =>
      session.management ? callAll<Destination>("/v1/observability/destinations", { signal }) : Promise.resolve({ data: [] }),
    [],
  )
  const editing = params.get("id")
  if (!session.management) return <ManagementOnly />
  const current = list.state === "ready" ? list.data.data.find((d) => d.id === editing) : undefined
  return (
    <div class="page">
      <Section title="Destinations">
        {list.state === "loading" ? <Loading what="destinations" /> : null}
        {list.state === "error" ? <Alert error={list.error} /> : null}
        {list.state === "ready" && list.data.data.length === 0 ? <Empty>No destinations yet: create one below.</Empty> : null}
        {list.state === "ready" ? (
          <ul class="rows">
            {list.data.data.map((d) => (
              <DestinationRow key={d.id} d={d} onChanged={reload} />
            ))}
          </ul>
        ) : null}
      </Section>
      <Section title={current ? `Edit ${current.name}` : "Create a destination"}>
        <DestinationForm
          key={current?.id ?? "new"}
          destination={current}
          onSaved={() => {
            reload()
            navigate("/console/destinations")
          }}
        />
      </Section>
    </div>
  )
}

const DestinationRow = ({ d, onChanged }: { d: Destination; onChanged: () => void }) => {
  const [result, setResult] = useState<string>("")
  const [error, setError] = useState<unknown>(null)
  const test = async () => {
    setResult("Sending a test…")
    setError(null)
    try {
      const r = await call<{ data: { ok: boolean; status: number; message: string } }>(`/v1/observability/destinations/${d.id}/test`, { method: "POST" })
      setResult(r.data.ok ? `Test delivered (HTTP ${r.data.status})` : `Test failed (HTTP ${r.data.status}): ${r.data.message}`)
    } catch (e) {
      setResult("")
      setError(e)
    }
  }
  const redeliver = async () => {
    setError(null)
    try {
      const r = await call<{ data: { requeued: number } }>(`/v1/observability/destinations/${d.id}/redeliver`, { method: "POST" })
      setResult(`${r.data.requeued} dead deliveries queued again`)
      onChanged()
    } catch (e) {
      setError(e)
    }
  }
  const s = d.delivery
  return (
    <li class="row" aria-label={`Destination ${d.name}`}>
      <div class="row-main">
        <b>{d.name}</b> <span class="tag">{d.type}</span> {d.enabled ? null : <span class="tag off">disabled</span>}
        <div class="row-facts">
          Pending {s?.pending ?? 0} · Dead {s?.dead ?? 0} · Last success {s?.last_success_at ?? "never"}
          {s?.last_error ? ` · Last error ${s.last_error_at ?? ""}: ${s.last_error}` : ""}
        </div>
      </div>
      <div class="actions">
        <button type="button" class="secondary" onClick={test}>
          Send test
        </button>
        <button type="button" class="secondary" onClick={redeliver} disabled={(s?.dead ?? 0) === 0}>
          Redeliver dead
        </button>
        <a href={`/console/destinations?id=${encodeURIComponent(d.id)}`} aria-label={`Edit ${d.name}`}>
          Edit
        </a>
      </div>
      <p role="status">{result}</p>
      {error !== null ? <Alert error={error} /> : null}
    </li>
  )
}

/** `Name: value` lines to a header map, and back (values of a stored map come back masked). */
const parseHeaders = (text: string): Record<string, string> =>
  Object.fromEntries(
    text
      .split("\n")
      .map((l) => l.trim())
      .filter(Boolean)
      .map((l) => {
        const i = l.indexOf(":")
        return i < 0 ? [l, ""] : [l.slice(0, i).trim(), l.slice(i + 1).trim()]
      }),
  )

const DestinationForm = ({ destination, onSaved }: { destination: Destination | undefined; onSaved: () => void }) => {
  const [name, setName] = useState(destination?.name ?? "")
  const [type, setType] = useState(destination?.type ?? "webhook")
  const [enabled, setEnabled] = useState(destination?.enabled ?? true)
  const [sampling, setSampling] = useState(String(destination?.sampling_rate ?? 1))
  const [values, setValues] = useState<Record<string, string>>(() => {
    const out: Record<string, string> = {}
    for (const f of KINDS[destination?.type ?? "webhook"] ?? []) {
      const v = destination?.config[f.name]
      if (!f.secret && !f.map && typeof v === "string") out[f.name] = v
      // A header map is shown as stored, values masked: sent back as shown, a value is kept (the API
      // replaces the map as a whole), so adding a line does not drop the others.
      if (f.map && typeof v === "object" && v !== null) out[f.name] = Object.entries(v).map(([header, value]) => `${header}: ${value}`).join("\n")
    }
    return out
  })
  const [error, setError] = useState<FormError | null>(null)
  const fields = KINDS[type] ?? []
  const submit = async (e: Event) => {
    e.preventDefault()
    setError(null)
    const config: Record<string, unknown> = {}
    for (const f of fields) {
      const v = values[f.name] ?? ""
      if (v === "") {
        // Secrets are write-only: an empty secret on an edit keeps the stored one. An optional field
        // or header list emptied on an edit is removed.
        const stored = destination?.type === type ? destination.config[f.name] : undefined
        if (!f.secret && !f.required && stored !== undefined) config[f.name] = null
        continue
      }
      config[f.name] = f.map ? parseHeaders(v) : v
    }
    const sampling_rate = Number(sampling)
    try {
      if (destination === undefined) {
        await call("/v1/observability/destinations", { method: "POST", json: { name, type, config, enabled, sampling_rate } })
      } else {
        await call(`/v1/observability/destinations/${destination.id}`, {
          method: "PATCH",
          json: { name, ...(type === destination.type ? {} : { type }), config, enabled, sampling_rate },
        })
      }
      onSaved()
    } catch (err) {
      setError(formErrorOf(err))
    }
  }
  return (
    <form class="form-grid" onSubmit={submit} aria-label={destination ? `Edit ${destination.name}` : "Create a destination"}>
      <Field label="Name" name="name" error={error}>
        {(id, d, inv) => <input id={id} value={name} aria-describedby={d} aria-invalid={inv} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <Field label="Kind" name="type" error={error}>
        {(id, d) => (
          <select id={id} value={type} aria-describedby={d} onChange={(e) => setType(e.currentTarget.value)}>
            {Object.keys(KINDS).map((k) => (
              <option key={k} value={k}>
                {k}
              </option>
            ))}
          </select>
        )}
      </Field>
      {fields.map((f) => (
        <Field
          key={`${type}.${f.name}`}
          label={`${f.name}${f.required ? "" : " (optional)"}`}
          name={`config.${f.name}`}
          error={error}
          hint={
            f.map
              ? destination
                ? "One Name: value a line; stored values are shown masked, and a line left as it is keeps its value"
                : "One Name: value a line; values are never shown again"
              : f.secret
                ? destination
                  ? "Write-only: leave empty to keep the stored value"
                  : "Write-only: never shown again"
                : undefined
          }
        >
          {(id, d, inv) =>
            f.options !== null ? (
              <select id={id} value={values[f.name] ?? ""} aria-describedby={d} onChange={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}>
                <option value="">{f.required ? "Choose…" : "Default"}</option>
                {f.options.map((o) => (
                  <option key={o} value={o}>
                    {o}
                  </option>
                ))}
              </select>
            ) : f.map ? (
              <textarea
                id={id}
                rows={3}
                placeholder="Authorization: Bearer …"
                value={values[f.name] ?? ""}
                aria-describedby={d}
                aria-invalid={inv}
                onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
              />
            ) : (
              <input
                id={id}
                type={(f.secret ? "password" : "text") as "text"}
                autocomplete="off"
                value={values[f.name] ?? ""}
                aria-describedby={d}
                aria-invalid={inv}
                onInput={(e) => setValues({ ...values, [f.name]: e.currentTarget.value })}
              />
            )
          }
        </Field>
      ))}
      <Field label="Sampling rate (0 to 1)" name="sampling_rate" error={error}>
        {(id, d, inv) => <input id={id} inputMode="decimal" value={sampling} aria-describedby={d} aria-invalid={inv} onInput={(e) => setSampling(e.currentTarget.value)} />}
      </Field>
      <div class="field check">
        <label>
          <input type="checkbox" checked={enabled} onChange={(e) => setEnabled(e.currentTarget.checked)} /> Enabled
        </label>
      </div>
      <FormAlert error={error} fields={["name", "type", "sampling_rate", "config"]} />
      <div class="actions">
        <button type="submit">{destination ? "Save destination" : "Create destination"}</button>
      </div>
    </form>
  )
}
