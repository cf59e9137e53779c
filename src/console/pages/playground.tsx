/**
 * Playground: a model (and plugins, server tools), one message, the answer streamed in as it is
 * generated (`POST /v1/responses`, `stream: true`), then its usage and cost and a link to its log entry.
 */
import { useRef, useState } from "preact/hooks"
import { call, int, type Model, storedKey, usd } from "../api.js"
import type { PageProps } from "../session.js"
import { Field, type FormError, FormAlert, Loading, useLoad } from "../ui.js"

const PLUGINS = ["web", "response-healing", "context-compression", "moderation"] as const
const TOOLS = ["openrouter:datetime", "openrouter:web_search", "openrouter:web_fetch"] as const

interface Usage {
  readonly input_tokens?: number
  readonly output_tokens?: number
  readonly cost?: number
}

/** The SSE events of a response stream, one parsed `data:` payload at a time. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<Record<string, unknown>> {
  const reader = body.getReader()
  const decoder = new TextDecoder()
  let buffer = ""
  for (;;) {
    const { value, done } = await reader.read()
    if (done) return
    buffer += decoder.decode(value, { stream: true })
    let end = buffer.indexOf("\n\n")
    while (end >= 0) {
      const block = buffer.slice(0, end)
      buffer = buffer.slice(end + 2)
      const data = block
        .split("\n")
        .filter((l) => l.startsWith("data:"))
        .map((l) => l.slice(5).trimStart())
        .join("\n")
      if (data !== "" && data !== "[DONE]") yield JSON.parse(data) as Record<string, unknown>
      end = buffer.indexOf("\n\n")
    }
  }
}

export const PlaygroundPage = (_: PageProps) => {
  const [models] = useLoad((signal) => call<{ data: Array<Model> }>("/v1/models", { signal }), [])
  const [model, setModel] = useState("")
  const [plugins, setPlugins] = useState<ReadonlyArray<string>>([])
  const [tools, setTools] = useState<ReadonlyArray<string>>([])
  const [message, setMessage] = useState("")
  const [answer, setAnswer] = useState("")
  const [usage, setUsage] = useState<Usage | null>(null)
  const [generationId, setGenerationId] = useState<string | null>(null)
  const [error, setError] = useState<FormError | null>(null)
  const [busy, setBusy] = useState(false)
  const abort = useRef<AbortController | null>(null)
  const chosen = model || (models.state === "ready" ? (models.data.data[0]?.id ?? "") : "")

  const send = async (e: Event) => {
    e.preventDefault()
    if (message.trim() === "") {
      setError({ field: "input", message: "Write a message to send" })
      return
    }
    setBusy(true)
    setError(null)
    setAnswer("")
    setUsage(null)
    setGenerationId(null)
    const ctl = new AbortController()
    abort.current = ctl
    try {
      const body: Record<string, unknown> = { model: chosen, input: message, stream: true }
      if (plugins.length > 0) body.plugins = plugins.map((id) => ({ id }))
      if (tools.length > 0) body.tools = tools.map((type) => ({ type }))
      const res = await fetch("/v1/responses", {
        method: "POST",
        headers: { authorization: `Bearer ${storedKey() ?? ""}`, "content-type": "application/json" },
        body: JSON.stringify(body),
        signal: ctl.signal,
        credentials: "omit",
      })
      setGenerationId(res.headers.get("x-generation-id"))
      if (!res.ok || res.body === null) {
        const text = await res.text()
        let message = `HTTP ${res.status}`
        try {
          message = (JSON.parse(text) as { error?: { message?: string } }).error?.message ?? message
        } catch {}
        const field = /^Invalid request: ([\w.[\]]+): /.exec(message)?.[1] ?? null
        setError({ field: field === "model" || field === "input" ? field : field?.startsWith("plugins") ? "plugins" : field, message })
        return
      }
      let text = ""
      for await (const ev of events(res.body)) {
        if (ev.type === "response.output_text.delta" && typeof ev.delta === "string") {
          text += ev.delta
          setAnswer(text)
        } else if (ev.type === "response.completed" || ev.type === "response.incomplete" || ev.type === "response.failed") {
          const response = ev.response as { usage?: Usage; error?: { message?: string } | null } | undefined
          setUsage(response?.usage ?? null)
          if (ev.type === "response.failed") setError({ field: null, message: response?.error?.message ?? "The response failed" })
        } else if (ev.type === "error") {
          setError({ field: null, message: String((ev as { message?: unknown }).message ?? "The stream failed") })
        }
      }
    } catch (err) {
      if (!ctl.signal.aborted) setError({ field: null, message: String(err) })
    } finally {
      setBusy(false)
      abort.current = null
    }
  }
  const toggle = (list: ReadonlyArray<string>, item: string) => (list.includes(item) ? list.filter((x) => x !== item) : [...list, item])

  return (
    <div class="page">
      <form class="form-grid" onSubmit={send} aria-label="Playground">
        <Field label="Model" name="model" error={error}>
          {(id, d, inv) =>
            models.state === "ready" ? (
              <select id={id} value={chosen} aria-describedby={d} aria-invalid={inv} onChange={(e) => setModel(e.currentTarget.value)}>
                {models.data.data.map((m) => (
                  <option key={m.id} value={m.id}>
                    {m.id}
                  </option>
                ))}
              </select>
            ) : (
              <Loading what="models" />
            )
          }
        </Field>
        <fieldset class="field check">
          <legend>Plugins</legend>
          {PLUGINS.map((p) => (
            <label key={p}>
              <input type="checkbox" checked={plugins.includes(p)} onChange={() => setPlugins(toggle(plugins, p))} /> {p}
            </label>
          ))}
        </fieldset>
        <fieldset class="field check">
          <legend>Server tools</legend>
          {TOOLS.map((t) => (
            <label key={t}>
              <input type="checkbox" checked={tools.includes(t)} onChange={() => setTools(toggle(tools, t))} /> {t}
            </label>
          ))}
        </fieldset>
        <Field label="Message" name="input" error={error} wide>
          {(id, d, inv) => <textarea id={id} rows={4} value={message} aria-describedby={d} aria-invalid={inv} onInput={(e) => setMessage(e.currentTarget.value)} />}
        </Field>
        <FormAlert error={error} fields={["model", "input"]} />
        <div class="actions">
          <button type="submit" disabled={busy || chosen === ""}>
            {busy ? "Streaming…" : "Send"}
          </button>
          {busy ? (
            <button type="button" class="secondary" onClick={() => abort.current?.abort()}>
              Stop
            </button>
          ) : null}
        </div>
      </form>
      <section class="card" aria-label="Answer">
        <h2>Answer</h2>
        <output class="answer" aria-live="polite" aria-busy={busy}>
          {answer || (busy ? "…" : "The answer appears here as it streams.")}
        </output>
        {usage !== null ? (
          <p class="usage">
            {int(usage.input_tokens)} prompt tokens · {int(usage.output_tokens)} completion tokens · cost {usd(usage.cost ?? null)}
          </p>
        ) : null}
        {generationId !== null && !busy ? (
          <p>
            <a href={`/console/logs?id=${encodeURIComponent(generationId)}`}>Open its log entry</a>
          </p>
        ) : null}
      </section>
    </div>
  )
}
