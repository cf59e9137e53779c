/**
 * What the benches read of a server from /proc (Linux): CPU (user and kernel) and minor page
 * faults of a process or one of its threads, and every thread's, summed by name between two
 * readings. Kernel time and faults tell memory churn (fresh pages touched, freed pages returned)
 * from work. Used by scripts/bench-run.ts and scripts/bench-broadcast.ts.
 */
import { execSync } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"

const clockTicks = Number(execSync("getconf CLK_TCK").toString().trim()) || 100

export interface Usage {
  /** µs of CPU in user mode. */
  readonly user: number
  /** µs of CPU in the kernel. */
  readonly kernel: number
  readonly faults: number
}

/** A /proc stat file's (`/proc/<pid>/stat`, `/proc/<pid>/task/<tid>/stat`) CPU and minor page faults. */
export const usageOf = (path: string): Usage => {
  const stat = readFileSync(path, "utf8")
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
  return { user: (Number(fields[11]) * 1e6) / clockTicks, kernel: (Number(fields[12]) * 1e6) / clockTicks, faults: Number(fields[7]) }
}

/** utime + stime of a /proc stat file, in µs. */
export const cpuOf = (path: string): number => {
  const { user, kernel } = usageOf(path)
  return user + kernel
}

export type ThreadUsage = Usage & { readonly name: string }

/** Every thread's usage by id, with its name ("Worker" for a Bun Worker's thread); none once the process has gone. */
export const threadUsages = (pid: number): Map<string, ThreadUsage> => {
  const out = new Map<string, ThreadUsage>()
  let tids: Array<string> = []
  try {
    tids = readdirSync(`/proc/${pid}/task`)
  } catch {
    return out
  }
  for (const tid of tids) {
    try {
      out.set(tid, { name: readFileSync(`/proc/${pid}/task/${tid}/comm`, "utf8").trim(), ...usageOf(`/proc/${pid}/task/${tid}/stat`) })
    } catch {
      // ended between the listing and the read
    }
  }
  return out
}

/** Each thread's usage between two `threadUsages`, summed by name, the main thread as "main" (a thread started between counts from 0). */
export const usageByName = (pid: number, before: ReadonlyMap<string, ThreadUsage>, after: ReadonlyMap<string, ThreadUsage>): Map<string, Usage> => {
  const out = new Map<string, { user: number; kernel: number; faults: number }>()
  for (const [tid, t] of after) {
    const name = tid === String(pid) ? "main" : t.name
    const b = before.get(tid)
    const sum = out.get(name) ?? { user: 0, kernel: 0, faults: 0 }
    sum.user += t.user - (b?.user ?? 0)
    sum.kernel += t.kernel - (b?.kernel ?? 0)
    sum.faults += t.faults - (b?.faults ?? 0)
    out.set(name, sum)
  }
  return out
}
