/**
 * `scripts/start` raises the soft limit of open files to the hard one: every
 * connection is a descriptor, and at a soft limit of 1,024 a thousand held connections used them all.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { readUntilListening } from "../support/spawned.js"

const root = join(import.meta.dir, "..", "..")
const dir = mkdtempSync(join(tmpdir(), "gw-start-"))
afterAll(() => rmSync(dir, { recursive: true, force: true }))

const limitsOf = (pid: number) => {
  const line = readFileSync(`/proc/${pid}/limits`, "utf8")
    .split("\n")
    .find((l) => l.startsWith("Max open files"))
  const [soft, hard] = (line ?? "").split(/\s{2,}/).slice(1, 3)
  return { soft, hard }
}

/** The local addresses (hex, as /proc/net/tcp{,6} writes them) listening on `port`. */
const listeningAddresses = (port: number): Array<string> => {
  const portHex = port.toString(16).toUpperCase().padStart(4, "0")
  return ["/proc/net/tcp", "/proc/net/tcp6"].flatMap((file) =>
    readFileSync(file, "utf8")
      .split("\n")
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((cols) => cols[1]?.endsWith(`:${portHex}`) && cols[3] === "0A")
      .map((cols) => (cols[1] ?? "").split(":")[0] ?? ""),
  )
}

describe("scripts/start", () => {
  test.skipIf(!existsSync("/proc/net/tcp"))("binds 127.0.0.1 only when HOST is not set", async () => {
    const env: Record<string, string | undefined> = { ...process.env, PORT: "0", GATEWAY_DATA_DIR: dir, DATABASE_URL: ":memory:", GATEWAY_LOG_LEVEL: "none" }
    delete env.HOST
    const proc = Bun.spawn(["bash", "scripts/start"], { cwd: root, env, stdout: "pipe", stderr: "inherit" })
    try {
      const { url, out } = await readUntilListening(proc, "scripts/start")
      const port = Number(new URL(url).port)
      // 0100007F is 127.0.0.1 as /proc/net/tcp writes it; 00000000 (every interface) was the default before.
      expect(listeningAddresses(port)).toEqual(["0100007F"])
      expect(out).toContain("bound to 127.0.0.1")
    } finally {
      proc.kill("SIGKILL")
      await proc.exited
    }
  }, 30_000)


  test.skipIf(!existsSync("/proc/self/limits"))("raises the soft limit of open files to the hard limit", async () => {
    const proc = Bun.spawn(["bash", "-c", "ulimit -Sn 256 && exec bash scripts/start"], {
      cwd: root,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: ":memory:", GATEWAY_LOG_LEVEL: "none" },
      stdout: "pipe",
      stderr: "inherit",
    })
    try {
      await readUntilListening(proc, "scripts/start")
      const { soft, hard } = limitsOf(proc.pid)
      expect(hard).toBeDefined()
      expect(soft).toBe(hard)
    } finally {
      proc.kill("SIGKILL")
      await proc.exited
    }
  }, 30_000)
})
