/**
 * The console's shell: sign-in with an API key, the navigation, and the page of the current path
 * (/console/<page>, history API; every link is a real link, so keyboard and middle-click work).
 */
import { render } from "preact"
import { useEffect, useState } from "preact/hooks"
import { call, type CurrentKey, forgetKey, rememberKey, storedKey } from "./api.js"
import { ActivityPage } from "./pages/activity.js"
import { DestinationsPage } from "./pages/destinations.js"
import { KeysPage } from "./pages/keys.js"
import { LogsPage } from "./pages/logs.js"
import { ModelsPage } from "./pages/models.js"
import { PlaygroundPage } from "./pages/playground.js"
import { PresetsPage } from "./pages/presets.js"
import { WorkspacesPage } from "./pages/workspaces.js"
import { Field, type FormError, formErrorOf, FormAlert } from "./ui.js"
import type { Session } from "./session.js"

const PAGES = [
  { path: "activity", name: "Activity", page: ActivityPage },
  { path: "logs", name: "Logs", page: LogsPage },
  { path: "keys", name: "Keys", page: KeysPage },
  { path: "workspaces", name: "Workspaces", page: WorkspacesPage },
  { path: "presets", name: "Presets", page: PresetsPage },
  { path: "destinations", name: "Destinations", page: DestinationsPage },
  { path: "models", name: "Models", page: ModelsPage },
  { path: "playground", name: "Playground", page: PlaygroundPage },
] as const

const pageOf = (pathname: string) => {
  const name = pathname.replace(/^\/console\/?/, "").split("/")[0] || "activity"
  return PAGES.find((p) => p.path === name) ?? PAGES[0]
}

const SignIn = ({ onSignedIn }: { onSignedIn: (s: Session) => void }) => {
  const [key, setKey] = useState("")
  const [error, setError] = useState<FormError | null>(null)
  const [busy, setBusy] = useState(false)
  const submit = async (e: Event) => {
    e.preventDefault()
    if (key.trim() === "") {
      setError({ field: "key", message: "Enter an API key of this gateway" })
      return
    }
    setBusy(true)
    try {
      const me = await call<CurrentKey>("/v1/key", { key: key.trim() })
      rememberKey(key.trim())
      onSignedIn({ key: key.trim(), management: me.data.is_management_key, label: me.data.label, workspaceId: me.data.workspace_id })
    } catch (err) {
      const f = formErrorOf(err)
      setError({ field: "key", message: f.message })
    } finally {
      setBusy(false)
    }
  }
  return (
    <main class="signin">
      <h1>Gateway console</h1>
      <form onSubmit={submit} class="card" aria-label="Sign in">
        <Field label="API key" name="key" error={error} hint="A management key sees its user's workspaces; an inference key sees its own usage and logs.">
          {(id, describedBy, invalid) => (
            <input
              id={id}
              type="password"
              autocomplete="off"
              spellcheck={false}
              value={key}
              onInput={(e) => setKey(e.currentTarget.value)}
              aria-describedby={describedBy}
              aria-invalid={invalid}
              autofocus
            />
          )}
        </Field>
        <FormAlert error={error} fields={["key"]} />
        <button type="submit" disabled={busy}>
          {busy ? "Signing in…" : "Sign in"}
        </button>
      </form>
    </main>
  )
}

const App = () => {
  const [session, setSession] = useState<Session | null | undefined>(undefined)
  const [location, setLocation] = useState(() => ({ path: window.location.pathname, search: window.location.search }))

  useEffect(() => {
    const key = storedKey()
    if (key === null) {
      setSession(null)
      return
    }
    call<CurrentKey>("/v1/key", { key }).then(
      (me) => setSession({ key, management: me.data.is_management_key, label: me.data.label, workspaceId: me.data.workspace_id }),
      () => {
        forgetKey()
        setSession(null)
      },
    )
  }, [])
  useEffect(() => {
    const onPop = () => setLocation({ path: window.location.pathname, search: window.location.search })
    window.addEventListener("popstate", onPop)
    return () => window.removeEventListener("popstate", onPop)
  }, [])

  const navigate = (to: string) => {
    window.history.pushState(null, "", to)
    setLocation({ path: window.location.pathname, search: window.location.search })
    window.scrollTo(0, 0)
  }
  /** In-app links: the page changes without a reload (a modified click opens a tab as usual). */
  const onNavClick = (e: MouseEvent) => {
    const a = (e.target as HTMLElement).closest("a")
    if (a === null || e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return
    const href = a.getAttribute("href")
    if (href === null || !href.startsWith("/console")) return
    e.preventDefault()
    navigate(href)
  }

  useEffect(() => {
    document.addEventListener("click", onNavClick)
    return () => document.removeEventListener("click", onNavClick)
  })

  if (session === undefined) return <p class="loading" role="status">Loading the console…</p>
  if (session === null) return <SignIn onSignedIn={(s) => setSession(s)} />

  const current = pageOf(location.path)
  const Page = current.page
  const signOut = () => {
    forgetKey()
    setSession(null)
    navigate("/console")
  }
  return (
    <div class="shell">
      <a class="skip" href="#main">
        Skip to content
      </a>
      <header class="top">
        <span class="brand">Gateway console</span>
        <nav aria-label="Console">
          <ul>
            {PAGES.map((p) => (
              <li key={p.path}>
                <a href={`/console/${p.path}`} aria-current={p === current ? "page" : undefined}>
                  {p.name}
                </a>
              </li>
            ))}
          </ul>
        </nav>
        <span class="who">
          <span title={session.management ? "management key" : "inference key"}>
            {session.label} ({session.management ? "management" : "inference"})
          </span>
          <button type="button" class="secondary" onClick={signOut}>
            Sign out
          </button>
        </span>
      </header>
      <main id="main" tabIndex={-1}>
        <h1>{current.name}</h1>
        <Page session={session} params={new URLSearchParams(location.search)} navigate={navigate} />
      </main>
    </div>
  )
}

const root = document.getElementById("app")
if (root !== null) {
  root.textContent = ""
  render(<App />, root)
}
