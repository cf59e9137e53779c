/**
 * The web console's files (src/console/, docs/console.md), served under /console/ only. The page
 * is an HTML import: `bun build --compile` bundles it into the binary (its `files`), and from
 * source (`bun src/main.ts`) it is bundled in memory on the first request. Either way the files are
 * served here, not by Bun's own HTML route: that one injects an inline script and a reload client
 * unless `development: false`, serves hashed chunks at the root and, compiled, without
 * Cache-Control. Hashed assets are immutable; the page itself is revalidated (a new build, new
 * hashes). No request here reads the store or touches the data plane.
 */
import { basename } from "node:path"
import type { HTMLBundle } from "bun"

export const CONSOLE_PATH = "/console"
const ASSETS = `${CONSOLE_PATH}/assets/`

/**
 * The page's policy: scripts and styles from the console's own files only (no inline script, no
 * eval), calls to this origin only, never framed. uPlot and Preact set styles through the CSSOM,
 * which `style-src 'self'` allows.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; font-src 'self'; connect-src 'self'; " +
  "frame-ancestors 'none'; base-uri 'none'; form-action 'none'"

const COMMON = {
  "x-content-type-options": "nosniff",
  "referrer-policy": "no-referrer",
}

interface ConsoleFile {
  readonly body: ArrayBuffer
  readonly type: string
}

interface ConsoleFiles {
  readonly page: string
  readonly assets: ReadonlyMap<string, ConsoleFile>
}

/** The compiled binary's files: read from the embedded bundle; the page's root references moved under /console/assets/. */
const embedded = async (files: NonNullable<HTMLBundle["files"]>): Promise<ConsoleFiles> => {
  const assets = new Map<string, ConsoleFile>()
  let page = ""
  for (const f of files) {
    if (f.loader === "html") page = await Bun.file(f.path).text()
    else assets.set(basename(f.path), { body: await Bun.file(f.path).arrayBuffer(), type: f.headers["content-type"] })
  }
  for (const name of assets.keys()) page = page.replaceAll(`"/${name}"`, `"${ASSETS}${name}"`).replaceAll(`"./${name}"`, `"${ASSETS}${name}"`)
  return { page, assets }
}

/** From source: the page bundled in memory, minified, its assets named by content hash under /console/assets/. */
const bundled = async (index: string): Promise<ConsoleFiles> => {
  const out = await Bun.build({ entrypoints: [index], minify: true, publicPath: ASSETS, target: "browser" })
  if (!out.success) throw new Error(`The console could not be bundled: ${out.logs.map(String).join("; ")}`)
  const assets = new Map<string, ConsoleFile>()
  let page = ""
  for (const o of out.outputs) {
    if (o.type.startsWith("text/html")) page = await o.text()
    else assets.set(basename(o.path), { body: await o.arrayBuffer(), type: o.type })
  }
  return { page, assets }
}

/** The console's routes for Bun's router: the page at /console and every client-side path under it, its assets. */
export const consoleRoutes = (bundle: HTMLBundle): Record<string, (req: Request) => Promise<Response>> => {
  let files: Promise<ConsoleFiles> | undefined
  const load = () => {
    files ??= bundle.files !== undefined ? embedded(bundle.files) : bundled(bundle.index)
    return files
  }
  const page = async (req: Request) => {
    if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed()
    const { page } = await load()
    return new Response(page, {
      headers: {
        ...COMMON,
        "content-type": "text/html;charset=utf-8",
        "content-security-policy": CONSOLE_CSP,
        // Revalidated each time: a new build's page names new asset hashes.
        "cache-control": "no-cache",
      },
    })
  }
  const asset = async (req: Request) => {
    if (req.method !== "GET" && req.method !== "HEAD") return methodNotAllowed()
    const name = new URL(req.url).pathname.slice(ASSETS.length)
    const file = (await load()).assets.get(name)
    if (file === undefined) return new Response("Not found", { status: 404, headers: { ...COMMON, "content-type": "text/plain" } })
    return new Response(file.body, {
      headers: { ...COMMON, "content-type": file.type, "cache-control": "public, max-age=31536000, immutable" },
    })
  }
  return { [CONSOLE_PATH]: page, [`${CONSOLE_PATH}/`]: page, [`${CONSOLE_PATH}/*`]: page, [`${ASSETS}*`]: asset }
}

const methodNotAllowed = () =>
  new Response(JSON.stringify({ error: { code: 405, message: "Only GET and HEAD are allowed on the console" }, user_id: null }), {
    status: 405,
    headers: { "content-type": "application/json", allow: "GET, HEAD" },
  })
