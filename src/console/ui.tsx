/** The console's shared pieces: labelled fields with their error beside them, states, tables. */
import type { ComponentChildren, JSX } from "preact"
import { useEffect, useRef, useState } from "preact/hooks"
import { ApiError } from "./api.js"

let nextId = 0
/** A stable id for a label's `for`. */
export const useId = (prefix: string): string => {
  const [id] = useState(() => `${prefix}-${++nextId}`)
  return id
}

/** The error of a form: the field it names (shown beside that field), or the form as a whole. */
export interface FormError {
  readonly field: string | null
  readonly message: string
}

export const formErrorOf = (e: unknown): FormError =>
  e instanceof ApiError ? { field: e.field, message: e.message } : { field: null, message: String(e) }

interface FieldProps {
  readonly label: string
  /** The API's name of the field: an error naming it is shown here. */
  readonly name: string
  readonly error?: FormError | null
  readonly hint?: string
  /** Spans the whole row of a form grid (a text area). */
  readonly wide?: boolean
  readonly children: (id: string, describedBy: string | undefined, invalid: boolean) => JSX.Element
}

/** A label, its control and, when the API named this field, the error right under it. */
export const Field = ({ label, name, error, hint, wide, children }: FieldProps) => {
  const id = useId(`f-${name}`)
  const mine = error != null && error.field !== null && (error.field === name || error.field.startsWith(`${name}.`))
  const errId = `${id}-err`
  const hintId = `${id}-hint`
  const describedBy = [mine ? errId : "", hint ? hintId : ""].filter(Boolean).join(" ") || undefined
  return (
    <div class={`field${mine ? " invalid" : ""}${wide ? " wide" : ""}`}>
      <label for={id}>{label}</label>
      {children(id, describedBy, mine)}
      {hint ? (
        <small id={hintId} class="hint">
          {hint}
        </small>
      ) : null}
      {mine ? (
        <p id={errId} class="field-error" role="alert">
          {error?.message}
        </p>
      ) : null}
    </div>
  )
}

/** A form's error that names no field of the form. */
export const FormAlert = ({ error, fields }: { error: FormError | null; fields: ReadonlyArray<string> }) => {
  if (error === null) return null
  if (error.field !== null && fields.some((f) => error.field === f || error.field?.startsWith(`${f}.`))) return null
  return (
    <p class="form-error" role="alert">
      {error.message}
    </p>
  )
}

export const Loading = ({ what }: { what: string }) => (
  <p class="loading" role="status" aria-live="polite">
    Loading {what}…
  </p>
)

export const Empty = ({ children }: { children: ComponentChildren }) => <p class="empty">{children}</p>

export const Alert = ({ error }: { error: unknown }) => (
  <p class="form-error" role="alert">
    {error instanceof Error ? error.message : String(error)}
  </p>
)

/** Data loaded for the current arguments: loading, failed or ready. */
export type Loaded<T> = { readonly state: "loading" } | { readonly state: "error"; readonly error: unknown } | { readonly state: "ready"; readonly data: T }

export const useLoad = <T,>(load: (signal: AbortSignal) => Promise<T>, deps: ReadonlyArray<unknown>): [Loaded<T>, () => void] => {
  const [value, setValue] = useState<Loaded<T>>({ state: "loading" })
  const [tick, setTick] = useState(0)
  const depsKey = JSON.stringify(deps)
  const shown = useRef<string | null>(null)
  useEffect(() => {
    const ctl = new AbortController()
    // New arguments show the loading state; a reload of the same ones keeps what is shown until it is back.
    if (shown.current !== depsKey) setValue({ state: "loading" })
    load(ctl.signal).then(
      (data) => {
        if (ctl.signal.aborted) return
        shown.current = depsKey
        setValue({ state: "ready", data })
      },
      (error: unknown) => {
        if (ctl.signal.aborted) return
        shown.current = depsKey
        setValue({ state: "error", error })
      },
    )
    return () => ctl.abort()
    // The caller names what the load depends on (`deps`).
  }, [depsKey, tick])
  return [value, () => setTick((t) => t + 1)]
}

/** A horizontal bar for a value's share of the largest (the tables' charts). */
export const Bar = ({ value, max, label }: { value: number; max: number; label: string }) => (
  <span class="bar" role="img" aria-label={label}>
    <span class="bar-fill" style={{ width: `${max > 0 ? Math.max(1, (100 * value) / max) : 0}%` }} />
  </span>
)

export const Section = ({ title, children, actions }: { title: string; children: ComponentChildren; actions?: ComponentChildren }) => (
  <section class="card">
    <header class="card-head">
      <h2>{title}</h2>
      {actions}
    </header>
    {children}
  </section>
)

/** A table under its column headings, scrolled sideways on a narrow screen; `children` are its rows. */
export const Table = ({ columns, children }: { columns: ReadonlyArray<string>; children: ComponentChildren }) => (
  <div class="table-wrap">
    <table>
      <thead>
        <tr>
          {columns.map((column) => (
            <th scope="col" key={column}>
              {column}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>{children}</tbody>
    </table>
  </div>
)
