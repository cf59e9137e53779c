/**
 * Presets (management keys): the list, a preset's versions, two versions side by side with their
 * differing lines marked, and a new version (a Responses request body, as the API takes it).
 */
import { useState } from "preact/hooks"
import { call, callAll } from "../api.js"
import type { PageProps } from "../session.js"
import { Alert, Empty, Field, type FormError, FormAlert, formErrorOf, Loading, Section, useLoad } from "../ui.js"
import { ManagementOnly } from "./keys.js"

interface Preset {
  readonly slug: string
  readonly name: string
  readonly description: string
  readonly updated_at: string
}
interface Version {
  readonly version: number
  readonly config: Record<string, unknown>
  readonly system_prompt: string | null
  readonly created_at: string
}

/** A version as the lines the diff compares: its system prompt and its config, keys sorted. */
const linesOf = (v: Version): Array<string> => {
  const sorted = (x: unknown): unknown =>
    Array.isArray(x) ? x.map(sorted) : x !== null && typeof x === "object" ? Object.fromEntries(Object.entries(x).sort(([a], [b]) => a.localeCompare(b)).map(([k, y]) => [k, sorted(y)])) : x
  return [`system prompt: ${v.system_prompt ?? "(none)"}`, ...JSON.stringify(sorted(v.config), null, 2).split("\n")]
}

/** Line pairs of a longest-common-subsequence diff: equal lines side by side, the rest marked. */
export const diffLines = (a: ReadonlyArray<string>, b: ReadonlyArray<string>): Array<{ left: string | null; right: string | null; same: boolean }> => {
  const n = a.length
  const m = b.length
  const lcs: Array<Array<number>> = Array.from({ length: n + 1 }, () => new Array<number>(m + 1).fill(0))
  for (let i = n - 1; i >= 0; i--) for (let j = m - 1; j >= 0; j--) lcs[i][j] = a[i] === b[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1])
  const out: Array<{ left: string | null; right: string | null; same: boolean }> = []
  let i = 0
  let j = 0
  while (i < n || j < m) {
    if (i < n && j < m && a[i] === b[j]) out.push({ left: a[i++], right: b[j++], same: true })
    else if (j < m && (i >= n || lcs[i][j + 1] >= lcs[i + 1][j])) out.push({ left: null, right: b[j++], same: false })
    else out.push({ left: a[i++], right: null, same: false })
  }
  return out
}

export const PresetsPage = ({ session, params, navigate }: PageProps) => {
  const [list, reload] = useLoad(
    (signal) => (session.management ? callAll<Preset>("/v1/presets", { signal }) : Promise.resolve({ data: [] })),
    [],
  )
  const slug = params.get("slug")
  if (!session.management) return <ManagementOnly />
  return (
    <div class="page">
      <Section title="Presets">
        {list.state === "loading" ? <Loading what="presets" /> : null}
        {list.state === "error" ? <Alert error={list.error} /> : null}
        {list.state === "ready" && list.data.data.length === 0 ? <Empty>No presets yet: create the first version below.</Empty> : null}
        {list.state === "ready" ? (
          <ul class="rows">
            {list.data.data.map((p) => (
              <li key={p.slug} class="row">
                <div class="row-main">
                  <b>{p.name}</b> <code>{p.slug}</code>
                  <div class="row-facts">{p.description || "No description"}</div>
                </div>
                <a href={`/console/presets?slug=${encodeURIComponent(p.slug)}`} aria-label={`Versions of ${p.slug}`}>
                  Versions
                </a>
              </li>
            ))}
          </ul>
        ) : null}
      </Section>
      {slug !== null ? <Versions slug={slug} /> : null}
      <Section title="New version">
        <NewVersion key={slug ?? ""} slug={slug ?? ""} onCreated={(s) => {
            reload()
            navigate(`/console/presets?slug=${encodeURIComponent(s)}`)
          }} />
      </Section>
    </div>
  )
}

const Versions = ({ slug }: { slug: string }) => {
  const [versions] = useLoad(
    (signal) => callAll<Version>(`/v1/presets/${encodeURIComponent(slug)}/versions`, { signal }),
    [slug],
  )
  const [left, setLeft] = useState<number | null>(null)
  const [right, setRight] = useState<number | null>(null)
  if (versions.state === "loading") return <Loading what="versions" />
  if (versions.state === "error") return <Alert error={versions.error} />
  const all = [...versions.data.data].sort((a, b) => b.version - a.version)
  const a = all.find((v) => v.version === (left ?? all[1]?.version ?? all[0]?.version))
  const b = all.find((v) => v.version === (right ?? all[0]?.version))
  return (
    <Section title={`Versions of ${slug}`}>
      <ul class="rows">
        {all.map((v) => (
          <li key={v.version} class="row">
            <div class="row-main">
              Version {v.version} <span class="row-facts">{v.created_at}</span>
            </div>
          </li>
        ))}
      </ul>
      <form class="filters" aria-label="Compare versions" onSubmit={(e) => e.preventDefault()}>
        <Field label="Left version" name="left" error={null}>
          {(id) => (
            <select id={id} value={String(a?.version ?? "")} onChange={(e) => setLeft(Number(e.currentTarget.value))}>
              {all.map((v) => (
                <option key={v.version} value={String(v.version)}>
                  {v.version}
                </option>
              ))}
            </select>
          )}
        </Field>
        <Field label="Right version" name="right" error={null}>
          {(id) => (
            <select id={id} value={String(b?.version ?? "")} onChange={(e) => setRight(Number(e.currentTarget.value))}>
              {all.map((v) => (
                <option key={v.version} value={String(v.version)}>
                  {v.version}
                </option>
              ))}
            </select>
          )}
        </Field>
      </form>
      {a !== undefined && b !== undefined ? (
        <div class="table-wrap">
          <table class="diff" aria-label={`Version ${a.version} and version ${b.version} side by side`}>
            <thead>
              <tr>
                <th scope="col">Version {a.version}</th>
                <th scope="col">Version {b.version}</th>
              </tr>
            </thead>
            <tbody>
              {diffLines(linesOf(a), linesOf(b)).map((l, i) => (
                <tr key={i} class={l.same ? "" : "changed"}>
                  <td class={l.left === null ? "" : l.same ? "" : "removed"}>
                    <pre>{l.left ?? ""}</pre>
                  </td>
                  <td class={l.right === null ? "" : l.same ? "" : "added"}>
                    <pre>{l.right ?? ""}</pre>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      ) : null}
    </Section>
  )
}

const NewVersion = ({ slug, onCreated }: { slug: string; onCreated: (slug: string) => void }) => {
  const [target, setTarget] = useState(slug)
  const [body, setBody] = useState('{\n  "model": "demo/echo",\n  "instructions": "You are terse.",\n  "temperature": 0.2\n}')
  const [error, setError] = useState<FormError | null>(null)
  const [done, setDone] = useState("")
  const submit = async (e: Event) => {
    e.preventDefault()
    setError(null)
    setDone("")
    let json: unknown
    try {
      json = JSON.parse(body)
    } catch (err) {
      setError({ field: "body", message: `Not JSON: ${String(err)}` })
      return
    }
    if (target.trim() === "") {
      setError({ field: "slug", message: "Name the preset (its slug)" })
      return
    }
    try {
      const res = await call<{ data: { designated_version: { version: number } } }>(`/v1/presets/${encodeURIComponent(target.trim())}/responses`, {
        method: "POST",
        json,
      })
      setDone(`Created version ${res.data.designated_version.version}`)
      onCreated(target.trim())
    } catch (err) {
      const f = formErrorOf(err)
      // A field of the body (model, temperature, …) is shown under the body.
      setError(f.field !== null && f.field !== "slug" ? { field: "body", message: f.message } : f.field === null && /slug/i.test(f.message) ? { field: "slug", message: f.message } : f)
    }
  }
  return (
    <form class="form-grid" onSubmit={submit} aria-label="New preset version">
      <Field label="Preset slug" name="slug" error={error}>
        {(id, d, inv) => <input id={id} value={target} aria-describedby={d} aria-invalid={inv} onInput={(e) => setTarget(e.currentTarget.value)} />}
      </Field>
      <Field label="Version (a Responses request body)" name="body" error={error} wide>
        {(id, d, inv) => (
          <textarea id={id} rows={8} value={body} aria-describedby={d} aria-invalid={inv} onInput={(e) => setBody(e.currentTarget.value)} />
        )}
      </Field>
      <FormAlert error={error} fields={["slug", "body"]} />
      <div class="actions">
        <button type="submit">Create version</button>
        <span role="status">{done}</span>
      </div>
    </form>
  )
}
