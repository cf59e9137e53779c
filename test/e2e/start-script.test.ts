/**
 * `scripts/start` raises the soft limit of open files to the hard one (issue 19 §1): every
 * connection is a descriptor, and at a soft limit of 1,024 a thousand held connections used them all.
 */
import { afterAll, describe, expect, test } from "bun:test"
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

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

describe("scripts/start", () => {
  test.skipIf(!existsSync("/proc/self/limits"))("raises the soft limit of open files to the hard limit", async () => {
    const proc = Bun.spawn(["bash", "-c", "ulimit -Sn 256 && exec bash scripts/start"], {
      cwd: root,
      env: { ...process.env, PORT: "0", HOST: "127.0.0.1", GATEWAY_DATA_DIR: dir, DATABASE_URL: ":memory:", GATEWAY_LOG_LEVEL: "none" },
      stdout: "pipe",
      stderr: "inherit",
    })
    try {
      const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
      let out = ""
      while (!out.includes("listening on")) {
        const { done, value } = await reader.read()
        if (done) throw new Error(`scripts/start exited: ${out}`)
        out += new TextDecoder().decode(value)
      }
      const { soft, hard } = limitsOf(proc.pid)
      expect(hard).toBeDefined()
      expect(soft).toBe(hard)
    } finally {
      proc.kill("SIGKILL")
      await proc.exited
    }
  }, 30_000)
})
