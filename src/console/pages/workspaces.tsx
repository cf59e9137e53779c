/** Workspaces (management keys): create, edit the settings, add and remove members. */
import { useState } from "preact/hooks"
import { call, type Workspace, callAll } from "../api.js"
import type { PageProps } from "../session.js"
import { Alert, Empty, Field, type FormError, FormAlert, formErrorOf, Loading, Section, useLoad } from "../ui.js"
import { ManagementOnly } from "./keys.js"

interface Member {
  readonly user_id: string
  readonly role: string
  readonly is_scim: boolean
}

export const WorkspacesPage = ({ session, params, navigate }: PageProps) => {
  const none = Promise.resolve({ data: [] })
  const [list, reload] = useLoad(
    (signal) => (session.management ? callAll<Workspace>("/v1/workspaces", { signal }) : none),
    [],
  )
  const selected = params.get("id")
  if (!session.management) return <ManagementOnly />
  return (
    <div class="page">
      <Section title="Create a workspace">
        <WorkspaceForm onSaved={(w) => {
            reload()
            navigate(`/console/workspaces?id=${encodeURIComponent(w.id)}`)
          }} />
      </Section>
      <Section title="Workspaces">
        {list.state === "loading" ? <Loading what="workspaces" /> : null}
        {list.state === "error" ? <Alert error={list.error} /> : null}
        {list.state === "ready" && list.data.data.length === 0 ? <Empty>No workspaces.</Empty> : null}
        {list.state === "ready" ? (
          <ul class="rows">
            {list.data.data.map((w) => (
              <li key={w.id} class="row">
                <div class="row-main">
                  <b>{w.name}</b> <code>{w.slug}</code>
                  <div class="row-facts">{w.description || "No description"}</div>
                </div>
                <a href={`/console/workspaces?id=${encodeURIComponent(w.id)}`} aria-label={`Edit ${w.name}`}>
                  Edit
                </a>
              </li>
            ))}
          </ul>
        ) : null}
      </Section>
      {selected !== null && list.state === "ready" ? (
        (() => {
          const w = list.data.data.find((x) => x.id === selected)
          return w === undefined ? (
            <Empty>Workspace {selected} not found.</Empty>
          ) : (
            <>
              <Section title={`Settings of ${w.name}`}>
                <WorkspaceForm workspace={w} onSaved={reload} />
              </Section>
              <Members workspace={w} />
            </>
          )
        })()
      ) : null}
    </div>
  )
}

const WorkspaceForm = ({ workspace, onSaved }: { workspace?: Workspace; onSaved: (w: Workspace) => void }) => {
  const [name, setName] = useState(workspace?.name ?? "")
  const [slug, setSlug] = useState(workspace?.slug ?? "")
  const [description, setDescription] = useState(workspace?.description ?? "")
  const [model, setModel] = useState(workspace?.default_text_model ?? "")
  const [broadcast, setBroadcast] = useState(workspace?.is_observability_broadcast_enabled ?? false)
  const [ioLogging, setIoLogging] = useState(workspace?.is_observability_io_logging_enabled ?? false)
  const [error, setError] = useState<FormError | null>(null)
  const [saved, setSaved] = useState("")
  const submit = async (e: Event) => {
    e.preventDefault()
    setError(null)
    setSaved("")
    const body: Record<string, unknown> = {
      name,
      slug,
      description: description === "" ? null : description,
      default_text_model: model === "" ? null : model,
      is_observability_broadcast_enabled: broadcast,
      is_observability_io_logging_enabled: ioLogging,
    }
    try {
      const res = workspace
        ? await call<{ data: Workspace }>(`/v1/workspaces/${encodeURIComponent(workspace.id)}`, { method: "PATCH", json: body })
        : await call<{ data: Workspace }>("/v1/workspaces", { method: "POST", json: body })
      setSaved(workspace ? "Saved" : `Created ${res.data.name}`)
      onSaved(res.data)
    } catch (err) {
      setError(formErrorOf(err))
    }
  }
  const fields = ["name", "slug", "description", "default_text_model"]
  return (
    <form class="form-grid" onSubmit={submit} aria-label={workspace ? `Settings of ${workspace.name}` : "Create a workspace"}>
      <Field label="Name" name="name" error={error}>
        {(id, d, inv) => <input id={id} value={name} aria-describedby={d} aria-invalid={inv} onInput={(e) => setName(e.currentTarget.value)} />}
      </Field>
      <Field label="Slug" name="slug" error={error} hint="Lowercase letters and digits joined by hyphens">
        {(id, d, inv) => <input id={id} value={slug} aria-describedby={d} aria-invalid={inv} onInput={(e) => setSlug(e.currentTarget.value)} />}
      </Field>
      <Field label="Description" name="description" error={error}>
        {(id, d, inv) => <input id={id} value={description} aria-describedby={d} aria-invalid={inv} onInput={(e) => setDescription(e.currentTarget.value)} />}
      </Field>
      <Field label="Default text model" name="default_text_model" error={error}>
        {(id, d, inv) => <input id={id} value={model} aria-describedby={d} aria-invalid={inv} onInput={(e) => setModel(e.currentTarget.value)} />}
      </Field>
      <div class="field check">
        <label>
          <input type="checkbox" checked={broadcast} onChange={(e) => setBroadcast(e.currentTarget.checked)} /> Broadcast to destinations
        </label>
        <label>
          <input type="checkbox" checked={ioLogging} onChange={(e) => setIoLogging(e.currentTarget.checked)} /> Log prompts and completions
        </label>
      </div>
      <FormAlert error={error} fields={fields} />
      <div class="actions">
        <button type="submit">{workspace ? "Save settings" : "Create workspace"}</button>
        <span role="status">{saved}</span>
      </div>
    </form>
  )
}

const Members = ({ workspace }: { workspace: Workspace }) => {
  const [members, reload] = useLoad(
    (signal) => call<{ data: Array<Member> }>(`/v1/workspaces/${encodeURIComponent(workspace.id)}/members`, { signal }),
    [workspace.id],
  )
  const [userId, setUserId] = useState("")
  const [error, setError] = useState<FormError | null>(null)
  const change = async (verb: "add" | "remove", ids: ReadonlyArray<string>) => {
    setError(null)
    try {
      await call(`/v1/workspaces/${encodeURIComponent(workspace.id)}/members/${verb}`, { method: "POST", json: { user_ids: ids } })
      if (verb === "add") setUserId("")
      reload()
    } catch (err) {
      setError(formErrorOf(err))
    }
  }
  return (
    <Section title={`Members of ${workspace.name}`}>
      <form
        class="form-grid"
        aria-label="Add a member"
        onSubmit={(e) => {
          e.preventDefault()
          change("add", [userId.trim()])
        }}
      >
        <Field label="User id" name="user_ids" error={error}>
          {(id, d, inv) => <input id={id} value={userId} aria-describedby={d} aria-invalid={inv} onInput={(e) => setUserId(e.currentTarget.value)} />}
        </Field>
        <div class="actions">
          <button type="submit">Add member</button>
        </div>
      </form>
      <FormAlert error={error} fields={["user_ids"]} />
      {members.state === "loading" ? <Loading what="members" /> : null}
      {members.state === "error" ? <Alert error={members.error} /> : null}
      {members.state === "ready" ? (
        <ul class="rows">
          {members.data.data.map((m) => (
            <li key={m.user_id} class="row">
              <div class="row-main">
                <code>{m.user_id}</code> <span class="tag">{m.role}</span>
              </div>
              <button type="button" class="secondary" disabled={m.is_scim} onClick={() => change("remove", [m.user_id])}>
                Remove {m.user_id}
              </button>
            </li>
          ))}
        </ul>
      ) : null}
    </Section>
  )
}
