/**
 * `gateway serve --workers 2`: a supervisor and two worker processes on one port (SO_REUSEPORT),
 * on this suite's engine. Both serve; a worker killed with SIGKILL is replaced and every connection
 * opened after the kill is answered; SIGHUP replaces the workers with no refused connection; a key
 * revoked through one worker is refused by the other at once (SQLite without Redis: a notice through
 * the supervisor); a $0.05 key at $0.01 a request admits exactly 5 of 200 concurrent requests across
 * the workers; SIGTERM drains both and the supervisor exits 0.
 */
import { afterAll, beforeAll, describe, expect, test } from "bun:test"
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { autoWorkerCount, labelled, mergeExpositions, spoolsLeftBy } from "../../src/supervisor.js"
import { freshDatabase, type TestDatabase } from "../support/db.js"
import { generationEntry } from "../support/generations.js"

const root = join(import.meta.dir, "..", "..")

const freePort = (): number => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}

describe("the supervisor's pieces", () => {
  test("auto counts the CPUs allowed, bounded by the cgroup's quota", () => {
    expect(autoWorkerCount("Cpus_allowed_list:\t0-3,6\n", "max 100000\n")).toBe(5)
    expect(autoWorkerCount("Cpus_allowed_list:\t0-7\n", "150000 100000\n")).toBe(2)
    expect(autoWorkerCount("Cpus_allowed_list:\t2\n", "")).toBe(1)
  })

  test("the spools an earlier run's workers left are found by their names (the next worker takes them over)", () => {
    const dir = mkdtempSync(join(tmpdir(), "gw-orphans-"))
    try {
      for (const name of ["ledger-spool.gw_1-w0.1.jsonl", "ledger-spool.gw_1-w12.7.jsonl", "ledger-spool.gw_1.jsonl", "ledger-spool.other-w0.1.jsonl", "ledger-spool.gw_1-wx.1.jsonl", "gateway.db"]) {
        writeFileSync(join(dir, name), "")
      }
      expect([...spoolsLeftBy({ dataDir: dir, instanceId: "gw:1" })].sort()).toEqual(["gw_1-w0.1", "gw_1-w12.7"])
      expect(spoolsLeftBy({ dataDir: join(dir, "missing"), instanceId: "gw" }).size).toBe(0)
    } finally {
      rmSync(dir, { recursive: true, force: true })
    }
  })

  test("each worker's series are labelled and merged under one HELP and TYPE", () => {
    const text = "# HELP x_total X.\n# TYPE x_total counter\nx_total{a=\"1\"} 3\nx_total 4\n"
    const merged = mergeExpositions([labelled(text, 0), labelled(text, 1)])
    expect(merged).toBe(
      '# HELP x_total X.\n# TYPE x_total counter\nx_total{worker="0",a="1"} 3\nx_total{worker="0"} 4\nx_total{worker="1",a="1"} 3\nx_total{worker="1"} 4\n',
    )
  })
})

describe("serve --workers 2", () => {
  let db: TestDatabase
  let dir: string
  let port: number
  let metricsPort: number
  let proc: ReturnType<typeof Bun.spawn>
  let output = ""
  const admin = `workers-admin-${crypto.randomUUID()}`
  const base = () => `http://127.0.0.1:${port}`

  /** A request on a connection of its own (so the kernel may hand it to either worker). */
  const call = (path: string, init: { key?: string; method?: string; json?: unknown } = {}) =>
    fetch(`${base()}${path}`, {
      method: init.method ?? "GET",
      headers: { authorization: `Bearer ${init.key ?? admin}`, "content-type": "application/json", connection: "close" },
      body: init.json === undefined ? undefined : JSON.stringify(init.json),
    })
  const workerRequests = async (): Promise<Map<string, number>> => {
    const text = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()
    const counts = new Map<string, number>()
    for (const match of text.matchAll(/^gateway_http_requests_total\{worker="(\d+)",[^}]*\} (\d+)/gm)) {
      counts.set(match[1] as string, (counts.get(match[1] as string) ?? 0) + Number(match[2]))
    }
    return counts
  }
  const waitFor = async (ok: () => Promise<boolean>, what: string, ms = 30_000) => {
    const until = Date.now() + ms
    while (Date.now() < until) {
      if (await ok().catch(() => false)) return
      await Bun.sleep(100)
    }
    throw new Error(`${what} not within ${ms} ms; output:\n${output}`)
  }
  const workersListening = async () => /gateway_workers 2/.test(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text())

  beforeAll(async () => {
    db = await freshDatabase()
    dir = mkdtempSync(join(tmpdir(), "gw-workers-"))
    port = freePort()
    metricsPort = freePort()
    const config = {
      providers: [{ id: "fake", kind: "fake" }],
      models: [
        { id: "t/echo", context_length: 100000, endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0, completion: 0 } }] },
        { id: "t/penny", context_length: 100000, endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0, completion: 0, request: 0.01 } }] },
      ],
    }
    writeFileSync(join(dir, "config.json"), JSON.stringify(config))
    proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve", "--workers", "2"], {
      cwd: root,
      stdout: "pipe",
      stderr: "pipe",
      env: {
        ...process.env,
        PORT: String(port),
        HOST: "127.0.0.1",
        GATEWAY_DATA_DIR: dir,
        DATABASE_URL: db.url,
        GATEWAY_CONFIG: join(dir, "config.json"),
        GATEWAY_MANAGEMENT_KEY: admin,
        GATEWAY_SUPERVISOR_METRICS_PORT: String(metricsPort),
        GATEWAY_LOG_LEVEL: "error",
      },
    })
    for (const stream of [proc.stdout, proc.stderr]) {
      void (async () => {
        const reader = (stream as ReadableStream<Uint8Array>).getReader()
        const decoder = new TextDecoder()
        for (;;) {
          const { done, value } = await reader.read()
          if (done) return
          output += decoder.decode(value, { stream: true })
        }
      })()
    }
    await waitFor(workersListening, "two workers listening", 60_000)
  }, 90_000)

  afterAll(async () => {
    proc?.kill("SIGKILL")
    await proc?.exited
    await db?.drop()
    rmSync(dir, { recursive: true, force: true })
  })

  test("both workers serve", async () => {
    for (let i = 0; i < 40; i++) expect((await call("/v1/health")).status).toBe(200)
    const counts = await workerRequests()
    expect(counts.get("0") ?? 0).toBeGreaterThan(0)
    expect(counts.get("1") ?? 0).toBeGreaterThan(0)
  })

  test("a key revoked through one worker is refused by the other within a second (a notice through the supervisor)", async () => {
    const created = (await (await call("/v1/keys", { method: "POST", json: { name: "revoked" } })).json()) as { key: string; data: { hash: string } }
    // On fresh connections both workers read (and cache) the key.
    for (let i = 0; i < 12; i++) expect((await call("/v1/key", { key: created.key })).status).toBe(200)
    expect((await call(`/v1/keys/${created.data.hash}`, { method: "PATCH", json: { disabled: true } })).status).toBe(200)
    // Heard through the supervisor within the bound, well before the cached row's 2 s expiry (which
    // is what the other worker would wait for without the notice). No timed assertion on speed.
    const started = Date.now()
    for (;;) {
      const after = await Promise.all(Array.from({ length: 12 }, () => call("/v1/key", { key: created.key })))
      const statuses = after.map((r) => r.status)
      if (statuses.every((s) => s === 401)) break
      expect(statuses.filter((s) => s !== 200 && s !== 401)).toEqual([])
      if (Date.now() - started > 1_000) throw new Error(`still accepted by a worker after 1 s: ${statuses.join(",")}`)
      await Bun.sleep(20)
    }
  })

  test("a $0.05 key at $0.01 a request admits exactly 5 of 200 concurrent requests across the workers", async () => {
    const created = (await (await call("/v1/keys", { method: "POST", json: { name: "penny", limit: 0.05 } })).json()) as { key: string }
    const answers = await Promise.all(
      Array.from({ length: 200 }, () => call("/v1/responses", { method: "POST", key: created.key, json: { model: "t/penny", input: "hi" } })),
    )
    const statuses = answers.map((r) => r.status)
    expect(statuses.filter((s) => s === 200).length).toBe(5)
    expect(statuses.filter((s) => s !== 200 && s !== 402)).toEqual([])
  })

  test("a worker killed with SIGKILL is replaced; every connection opened after the kill is answered", async () => {
    const pids = [...output.matchAll(/supervisor pid (\d+)/g)]
    expect(pids.length).toBe(1)
    const children = (await Bun.$`pgrep -P ${proc.pid}`.text()).trim().split("\n").map(Number)
    expect(children.length).toBe(2)
    const victim = children[0] as number
    // As if it had spooled a batch while the database was away: its replacement (a new name) takes it over.
    const victimId = /GATEWAY_INSTANCE_ID=([^\0]+)/.exec(readFileSync(`/proc/${victim}/environ`, "latin1"))?.[1] ?? ""
    const answered = await call("/v1/responses", { method: "POST", json: { model: "t/echo", input: "spooled" } })
    const generationId = answered.headers.get("x-generation-id") ?? ""
    await answered.arrayBuffer()
    const spoolFile = join(dir, `ledger-spool.${victimId}.jsonl`)
    // The generation the gateway wrote already: the replay finds it and skips the batch (nothing counted twice).
    const entry = generationEntry({ id: generationId, model: "t/echo", providerName: "fake" })
    writeFileSync(spoolFile, `${JSON.stringify({ s: 1, i: [{ entry }] })}\n`)
    process.kill(victim, "SIGKILL")
    // The kill is done when the process is gone (its listening socket closed with it).
    await waitFor(async () => {
      try {
        process.kill(victim, 0)
        return false
      } catch {
        return true
      }
    }, "the killed worker's exit")
    const statuses = []
    for (let i = 0; i < 30; i++) statuses.push((await call("/v1/health")).status)
    expect(statuses).toEqual(Array(30).fill(200))
    await waitFor(async () => /gateway_worker_restarts_total 1/.test(await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text()) && (await workersListening()), "the replacement")
    expect(output).toMatch(/worker \d exited \(code null, signal SIGKILL\)/)
    expect([victimId, generationId].every((s) => s !== "")).toBe(true)
    expect(existsSync(spoolFile)).toBe(false)
  }, 60_000)

  test("SIGHUP replaces the workers with no refused connection under concurrent connects", async () => {
    const before = (await Bun.$`pgrep -P ${proc.pid}`.text()).trim().split("\n").map(Number)
    let stop = false
    const failures: Array<string> = []
    let answered = 0
    const connecting = Promise.all(
      Array.from({ length: 4 }, async () => {
        while (!stop) {
          try {
            const res = await call("/v1/health")
            if (res.status === 200) answered++
            else failures.push(String(res.status))
          } catch (e) {
            failures.push((e as Error).message)
          }
        }
      }),
    )
    proc.kill("SIGHUP")
    await waitFor(async () => output.includes("workers replaced"), "the reload", 60_000)
    stop = true
    await connecting
    const after = (await Bun.$`pgrep -P ${proc.pid}`.text()).trim().split("\n").map(Number)
    expect(after.filter((pid) => before.includes(pid))).toEqual([])
    // Without net.ipv4.tcp_migrate_req, Linux resets the connections still queued on the old
    // worker's socket when it closes (docs/operations.md, SIGHUP): those resets are the kernel's.
    // A refused connection (nothing listening) is never allowed.
    expect(migratesQueuedConnections() ? failures : failures.filter((f) => !f.startsWith("ECONNRESET"))).toEqual([])
    expect(answered).toBeGreaterThan(0)
  }, 90_000)

  test("SIGHUP with a broken config file: the reload fails once, not retried, and the workers serve on", async () => {
    const children = async () => (await Bun.$`pgrep -P ${proc.pid}`.nothrow().text()).trim().split("\n").filter(Boolean).map(Number)
    const before = await children()
    const file = join(dir, "config.json")
    const good = readFileSync(file, "utf8")
    writeFileSync(file, '{"providers": [')
    try {
      const from = output.length
      proc.kill("SIGHUP")
      await waitFor(async () => output.slice(from).includes("reload failed"), "the failed reload", 60_000)
      await Bun.sleep(1_000)
      const since = output.slice(from)
      expect(since).toContain("not valid JSON")
      expect(since).not.toContain("restarting in")
      expect((await call("/v1/health")).status).toBe(200)
      expect((await children()).sort()).toEqual(before.sort())
    } finally {
      writeFileSync(file, good)
    }
  }, 90_000)

  test("SIGTERM drains every worker and the supervisor exits 0, no worker left behind", async () => {
    const workers = (await Bun.$`pgrep -P ${proc.pid}`.nothrow().text()).trim().split("\n").filter(Boolean).map(Number)
    expect(workers).toHaveLength(2)
    proc.kill("SIGTERM")
    expect(await proc.exited).toBe(0)
    expect(output).toContain("gateway: stopped")
    // Running, not a zombie (an exited child this container's init has not reaped yet).
    const alive = (pid: number) => {
      try {
        return !/^\d+ \(.*\) Z/.test(readFileSync(`/proc/${pid}/stat`, "utf8"))
      } catch {
        return false
      }
    }
    expect(workers.filter(alive)).toEqual([])
  }, 60_000)
})

/** Whether Linux hands a closing listener's queued connections to another socket of its port (`net.ipv4.tcp_migrate_req`). */
const migratesQueuedConnections = (): boolean => {
  try {
    return readFileSync("/proc/sys/net/ipv4/tcp_migrate_req", "utf8").trim() === "1"
  } catch {
    return false
  }
}

describe("serve --workers 2 that cannot start", () => {
  test("a worker that cannot listen (the port is taken) stops the start with its line: exit 1, no restarts, no stack trace", async () => {
    const taken = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response("taken") })
    const dir = mkdtempSync(join(tmpdir(), "gw-workers-taken-"))
    try {
      const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve", "--workers", "2"], {
        cwd: root,
        stdout: "pipe",
        stderr: "pipe",
        env: { ...process.env, PORT: String(taken.port), HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: join(dir, "g.db"), GATEWAY_LOG_LEVEL: "error" },
      })
      const code = await proc.exited
      const output = `${await new Response(proc.stdout).text()}${await new Response(proc.stderr).text()}`
      expect(code).toBe(1)
      expect(output).toContain(`port ${taken.port} on 127.0.0.1 is in use`)
      expect(output).toContain("stopping")
      expect(output).not.toContain("restarting in")
      expect(output).not.toMatch(/\n\s+at .*\(/)
    } finally {
      await taken.stop(true)
      rmSync(dir, { recursive: true, force: true })
    }
  }, 60_000)
})

describe("serve --workers 2 with a bad GATEWAY_SUPERVISOR_METRICS_PORT", () => {
  test("is refused with one line naming it (it was read as no port, silently)", () => {
    const run = Bun.spawnSync([process.execPath, join(root, "src", "main.ts"), "serve", "--workers", "2"], {
      cwd: root,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", DATABASE_URL: ":memory:", GATEWAY_SUPERVISOR_METRICS_PORT: "abc", GATEWAY_LOG_LEVEL: "none" },
      timeout: 20_000,
    })
    expect(run.exitCode).toBe(1)
    expect(run.stderr.toString().trim()).toBe('gateway: configuration error: environment: GATEWAY_SUPERVISOR_METRICS_PORT: must be an integer from 0 to 65535, not "abc"')
  }, 30_000)
})

describe("serve --workers 2 with PORT=0", () => {
  test("every worker listens on one port the supervisor picked (each had a port of its own)", async () => {
    const dir = mkdtempSync(join(tmpdir(), "gw-workers-port0-"))
    const proc = Bun.spawn([process.execPath, join(root, "src", "main.ts"), "serve", "--workers", "2"], {
      cwd: root,
      stdout: "pipe",
      stderr: "inherit",
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: join(dir, "g.db"), GATEWAY_LOG_LEVEL: "error" },
    })
    let output = ""
    const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
    const decoder = new TextDecoder()
    try {
      // Both workers' own lines (the supervisor's "workers listening" may come before the second's is written).
      const portsSeen = () => [...output.matchAll(/worker \d listening on http:\/\/127\.0\.0\.1:(\d+)\//g)].map((m) => m[1])
      const until = Date.now() + 60_000
      while (portsSeen().length < 2 && Date.now() < until) {
        const { done, value } = await reader.read()
        if (done) break
        output += decoder.decode(value, { stream: true })
      }
      const ports = portsSeen()
      expect(ports).toHaveLength(2)
      expect(new Set(ports).size).toBe(1)
      expect(Number(ports[0])).toBeGreaterThan(0)
    } finally {
      proc.kill("SIGTERM")
      await proc.exited
      rmSync(dir, { recursive: true, force: true })
    }
  }, 90_000)
})
