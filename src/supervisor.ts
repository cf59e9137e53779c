/**
 * `gateway serve --workers N`: one supervisor process and N worker processes that all accept on
 * the same port (SO_REUSEPORT: the kernel spreads new connections over them; a kept-alive
 * connection stays with the worker that accepted it). The supervisor
 * - starts worker 0 first (it migrates the database and makes the first management key), then the rest;
 * - restarts a worker that dies, with backoff (`gateway_worker_restarts_total`, and a log line);
 * - on SIGTERM or SIGINT passes SIGTERM on (each worker drains gracefully) and exits when all have;
 * - on SIGHUP replaces the workers one by one, each new one listening before the old one drains,
 *   so a config change reloads without a refused connection;
 * - relays what the workers tell each other over IPC (notices such as a key's revocation, where
 *   neither Redis nor Postgres carries them) and serves every worker's metrics, each series labelled
 *   with its worker, on a port of its own (`GATEWAY_SUPERVISOR_METRICS_PORT`, loopback).
 * Plain Bun processes: no Effect runtime here, the workers have theirs.
 */
import { existsSync, readdirSync, readFileSync } from "node:fs"
import { availableParallelism } from "node:os"
import type { SupervisorMessage } from "./services/worker-channel.js"
import { spoolPathOf } from "./store/spool.js"

export interface SupervisorOptions {
  readonly workers: number
  /** The command that starts one worker (this program's `serve`). */
  readonly command: ReadonlyArray<string>
  readonly instanceId: string
  /** The data folder, where a worker that stops with batches in its ledger spool leaves its file. */
  readonly dataDir: string
  /** Loopback port of the merged metrics (0: none). */
  readonly metricsPort: number
  readonly redisConfigured: boolean
  readonly log: (line: string) => void
}

/** `auto`: the CPUs this process may run on, bounded by its cgroup's `cpu.max` quota. */
export const autoWorkerCount = (status = readOr("/proc/self/status"), cpuMax = readOr("/sys/fs/cgroup/cpu.max")): number => {
  let cpus = availableParallelism()
  const allowed = /Cpus_allowed_list:\s*(\S+)/.exec(status)?.[1]
  if (allowed !== undefined) {
    let count = 0
    for (const part of allowed.split(",")) {
      const [from, to] = part.split("-").map(Number)
      if (from === undefined || !Number.isFinite(from)) continue
      count += to === undefined ? 1 : to - from + 1
    }
    if (count > 0) cpus = count
  }
  const [quota, period] = cpuMax.trim().split(/\s+/)
  if (quota !== undefined && quota !== "max" && period !== undefined) {
    const byQuota = Math.ceil(Number(quota) / Number(period))
    if (Number.isFinite(byQuota) && byQuota >= 1) cpus = Math.min(cpus, byQuota)
  }
  return Math.max(1, cpus)
}

function readOr(path: string): string {
  try {
    return readFileSync(path, "utf8")
  } catch {
    return ""
  }
}

/** `--workers` or GATEWAY_WORKERS: a positive integer or `auto`; undefined when the text is neither. */
export const parseWorkers = (text: string): number | undefined => {
  if (text === "auto") return autoWorkerCount()
  if (!/^[1-9][0-9]{0,3}$/.test(text)) return undefined
  return Number(text)
}

interface Worker {
  readonly index: number
  readonly generation: number
  readonly proc: ReturnType<typeof Bun.spawn>
  ready: boolean
  /** Set when the supervisor itself stops it (replaced, or shutting down): its exit is no crash. */
  retiring: boolean
  readonly startedAt: number
}

/** Adds `worker="i"` to every series of a worker's Prometheus text. */
export const labelled = (text: string, worker: number): string => {
  const out: Array<string> = []
  for (const line of text.split("\n")) {
    if (line === "" || line.startsWith("#")) {
      out.push(line)
      continue
    }
    const space = line.lastIndexOf(" ")
    const series = line.slice(0, space)
    const value = line.slice(space)
    const brace = series.indexOf("{")
    out.push(brace === -1 ? `${series}{worker="${worker}"}${value}` : `${series.slice(0, brace + 1)}worker="${worker}",${series.slice(brace + 1)}${value}`)
  }
  return out.join("\n")
}

/**
 * Merges the workers' texts: one HELP and TYPE per metric family, then every worker's series of
 * it. A series belongs to the family of the comment lines above it in its worker's text.
 */
export const mergeExpositions = (texts: ReadonlyArray<string>): string => {
  const families = new Map<string, { readonly comments: Array<string>; readonly series: Array<string> }>()
  const familyOf = (name: string) => {
    let family = families.get(name)
    if (family === undefined) {
      family = { comments: [], series: [] }
      families.set(name, family)
    }
    return family
  }
  for (const text of texts) {
    let current = ""
    for (const line of text.split("\n")) {
      if (line === "") continue
      const comment = /^# (HELP|TYPE) (\S+)/.exec(line)
      if (comment !== null) {
        current = comment[2] as string
        const family = familyOf(current)
        if (!family.comments.some((l) => l.startsWith(`# ${comment[1]} `))) family.comments.push(line)
      } else if (!line.startsWith("#")) familyOf(current).series.push(line)
    }
  }
  const out: Array<string> = []
  for (const family of families.values()) out.push(...family.comments, ...family.series)
  return `${out.join("\n")}\n`
}

/** What the supervisor tracks: its workers by index, its counters, and the scrapes waiting for answers. */
interface Pool {
  readonly options: SupervisorOptions
  readonly workers: Map<number, Worker>
  /** A reload's new workers until they listen: not in `workers`, so the one each replaces serves on if it fails. */
  readonly candidates: Set<Worker>
  /** Counts every worker started: part of its instance id, so a restarted one never shares a name. */
  generation: number
  restarts: number
  stopping: boolean
  reloading: boolean
  /** Every worker of the first start listened: before, a worker that cannot start stops the start. */
  started: boolean
  /** The last restart delay per index (doubling while a worker keeps dying young). */
  readonly backoff: Map<number, number>
  readonly pendingMetrics: Map<number, { texts: Array<string>; expected: number; done: (text: string) => void }>
  metricsRequest: number
  /**
   * Instance ids of stopped workers whose ledger spool files are still there. Each worker has a
   * name no later one shares (holds are released by their lease, never by a namesake), so its
   * spool would be read by no one: the next worker started takes them over (`GATEWAY_ADOPT_SPOOLS`)
   * and commits them before it serves. An id leaves the set once a worker given it listens.
   */
  readonly orphanSpools: Set<string>
}

/** A notice one worker sent, passed on to every worker. */
const relay = (pool: Pool, message: SupervisorMessage) => {
  for (const w of pool.workers.values()) {
    try {
      w.proc.send(message)
    } catch {}
  }
}

/**
 * Starts worker `index`; resolves once it listens. A worker that dies unasked for is restarted, with
 * backoff. A `candidate` (a reload's) joins the pool only once it listens; one that exits before is
 * the reload's failure, not restarted: a broken config retried forever, and the slot it took made
 * the worker it was to replace an orphan still serving after SIGTERM.
 */
const spawn = (pool: Pool, index: number, candidate = false): Promise<Worker> =>
  new Promise((resolve, reject) => {
    const { options } = pool
    const gen = ++pool.generation
    const instanceId = `${options.instanceId}-w${index}.${gen}`
    const adopts = [...pool.orphanSpools]
    const worker: Worker = {
      index,
      generation: gen,
      ready: false,
      retiring: false,
      startedAt: Date.now(),
      proc: Bun.spawn([...options.command], {
        stdio: ["ignore", "inherit", "inherit"],
        env: {
          ...process.env,
          GATEWAY_WORKER_INDEX: String(index),
          GATEWAY_WORKERS_TOTAL: String(options.workers),
          // Each process its own name among those sharing the database: a worker starting never
          // releases a sibling's holds (they are released by their lease when a worker dies).
          GATEWAY_INSTANCE_ID: instanceId,
          GATEWAY_ADOPT_SPOOLS: adopts.join(","),
        },
        ipc: (message: SupervisorMessage) => {
          if (message.t === "ready") {
            worker.ready = true
            for (const id of adopts) pool.orphanSpools.delete(id)
            pool.candidates.delete(worker)
            resolve(worker)
          } else if (message.t === "notice") relay(pool, message)
          else if (message.t === "metrics") metricsArrived(pool, message.id, message.text, index)
        },
        onExit: (_proc, code, signal) => {
          pool.candidates.delete(worker)
          if (existsSync(spoolPathOf(options.dataDir, instanceId))) pool.orphanSpools.add(instanceId)
          if (pool.workers.get(index) === worker) pool.workers.delete(index)
          if (!worker.ready) reject(new Error(`worker ${index} exited before it listened (code ${code}, signal ${signal})`))
          if (worker.retiring || pool.stopping || (!worker.ready && (candidate || !pool.started))) return
          restartLater(pool, worker, `code ${code}, signal ${signal}`)
        },
      }),
    }
    if (candidate) pool.candidates.add(worker)
    else pool.workers.set(index, worker)
  })

/** A worker died: another in its place after a delay that doubles while its predecessors die young. */
const restartLater = (pool: Pool, worker: Worker, how: string) => {
  const { index } = worker
  pool.restarts++
  const delay = Math.min(10_000, Date.now() - worker.startedAt > 10_000 ? 100 : (pool.backoff.get(index) ?? 100) * 2)
  pool.backoff.set(index, delay)
  pool.options.log(`gateway: worker ${index} exited (${how}); restarting in ${delay} ms (restart ${pool.restarts})`)
  setTimeout(() => {
    if (!pool.stopping) void spawn(pool, index).catch((e) => pool.options.log(`gateway: ${(e as Error).message}`))
  }, delay)
}

/** One worker's answer to a scrape: the scrape ends when every worker asked has answered. */
const metricsArrived = (pool: Pool, id: number, text: string, worker: number) => {
  const pending = pool.pendingMetrics.get(id)
  if (pending === undefined) return
  pending.texts.push(labelled(text, worker))
  if (pending.texts.length === pending.expected) pending.done(mergeExpositions(pending.texts))
}

/** Every worker's metrics, labelled and merged, plus the supervisor's own. */
const collectMetrics = (pool: Pool) =>
  new Promise<string>((resolve) => {
    const id = ++pool.metricsRequest
    const live = [...pool.workers.values()].filter((w) => w.ready)
    const own = [
      "# HELP gateway_worker_restarts_total Workers the supervisor restarted after they died.",
      "# TYPE gateway_worker_restarts_total counter",
      `gateway_worker_restarts_total ${pool.restarts}`,
      "# HELP gateway_workers Workers listening now.",
      "# TYPE gateway_workers gauge",
      `gateway_workers ${live.length}`,
    ].join("\n")
    const finish = (text: string) => {
      pool.pendingMetrics.delete(id)
      resolve(`${own}\n${text}`)
    }
    if (live.length === 0) return finish("")
    const pending = { texts: [] as Array<string>, expected: live.length, done: finish }
    pool.pendingMetrics.set(id, pending)
    for (const w of live) w.proc.send({ t: "metrics-request", id } satisfies SupervisorMessage)
    // A worker that does not answer in time is left out of this scrape.
    setTimeout(() => {
      if (pool.pendingMetrics.has(id)) finish(mergeExpositions(pending.texts))
    }, 2_000)
  })

/** The merged metrics on a loopback port of their own. */
const serveMetrics = (pool: Pool, port: number) =>
  Bun.serve({
    port,
    hostname: "127.0.0.1",
    fetch: async (req) =>
      new URL(req.url).pathname === "/metrics"
        ? new Response(await collectMetrics(pool), { headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" } })
        : new Response("Not found\n", { status: 404 }),
  })

/** Stops a worker on purpose (it drains gracefully); resolves once it has exited. */
const retire = async (worker: Worker) => {
  worker.retiring = true
  worker.proc.kill("SIGTERM")
  await worker.proc.exited
}

/** SIGHUP: each worker replaced in turn; the new one listens before the old one stops accepting. */
const reload = async (pool: Pool) => {
  if (pool.reloading || pool.stopping) return
  const { log } = pool.options
  pool.reloading = true
  log("gateway: SIGHUP: replacing the workers one by one")
  try {
    for (let index = 0; index < pool.options.workers; index++) {
      const old = pool.workers.get(index)
      const fresh = await spawn(pool, index, true)
      pool.workers.set(index, fresh)
      if (old !== undefined) await retire(old)
    }
    log("gateway: workers replaced")
  } catch (e) {
    log(`gateway: reload failed: ${(e as Error).message} (its reason is the line above); the workers not yet replaced serve on`)
  } finally {
    pool.reloading = false
  }
}

/** SIGTERM or SIGINT: every worker drains, then the supervisor exits. */
const stop = async (pool: Pool) => {
  if (pool.stopping) return
  pool.stopping = true
  pool.options.log(`gateway: draining ${pool.workers.size} worker(s)`)
  await Promise.all([...pool.workers.values(), ...pool.candidates].map(retire))
  pool.options.log("gateway: stopped")
  process.exit(0)
}

/** The ledger spool files workers of an earlier run under this instance id left (none of them runs now). */
export const spoolsLeftBy = (options: Pick<SupervisorOptions, "dataDir" | "instanceId">): Set<string> => {
  const prefix = spoolPathOf("", `${options.instanceId}-w`).slice(0, -".jsonl".length)
  const found = new Set<string>()
  let names: Array<string>
  try {
    names = readdirSync(options.dataDir)
  } catch {
    return found
  }
  for (const name of names) {
    if (name.startsWith(prefix) && name.endsWith(".jsonl") && /^\d+\.\d+$/.test(name.slice(prefix.length, -".jsonl".length))) {
      found.add(name.slice("ledger-spool.".length, -".jsonl".length))
    }
  }
  return found
}

export const supervise = async (options: SupervisorOptions): Promise<never> => {
  const { log } = options
  const pool: Pool = {
    options,
    workers: new Map(),
    candidates: new Set(),
    generation: 0,
    restarts: 0,
    stopping: false,
    reloading: false,
    started: false,
    backoff: new Map(),
    pendingMetrics: new Map(),
    metricsRequest: 0,
    orphanSpools: spoolsLeftBy(options),
  }
  if (options.workers > 1 && !options.redisConfigured) {
    log("gateway: --workers without Redis: sticky sessions and cooldowns are per worker (set redis.url or REDIS_URL to share them)")
  }
  if (options.metricsPort > 0) serveMetrics(pool, options.metricsPort)
  process.on("SIGTERM", () => void stop(pool))
  process.on("SIGINT", () => void stop(pool))
  process.on("SIGHUP", () => void reload(pool))

  // Worker 0 first: it migrates the database and makes the first management key; then the others.
  try {
    await spawn(pool, 0)
    await Promise.all(Array.from({ length: options.workers - 1 }, (_, i) => spawn(pool, i + 1)))
    pool.started = true
  } catch (e) {
    // A worker that cannot start (its line above says why: the config, the port, the database) stops the start, not retried.
    pool.stopping = true
    log(`gateway: ${(e as Error).message}; stopping`)
    await Promise.all([...pool.workers.values()].map(retire))
    process.exit(1)
  }
  log(`gateway: ${options.workers} workers listening (supervisor pid ${process.pid})`)
  return new Promise<never>(() => {})
}
