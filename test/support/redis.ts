/** A Redis server of the test's own on a free port (stopped and started again by the test), from the machine's redis-server. */
import { spawnSync } from "node:child_process"

export const hasRedisServer = spawnSync("sh", ["-c", "command -v redis-server"]).status === 0

const freePort = (): number => {
  const probe = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch: () => new Response() })
  const port = probe.port ?? 0
  probe.stop(true)
  return port
}

export interface OwnRedis {
  readonly url: string
  readonly port: number
  /** Stops the server (SIGKILL: an outage, not a goodbye). */
  readonly stop: () => Promise<void>
  /** Starts it again on the same port (empty: it keeps nothing on disk). */
  readonly start: () => Promise<void>
  /** Freezes it (SIGSTOP): connections stay open, nothing answers. */
  readonly pause: () => void
  readonly resume: () => void
}

export const startOwnRedis = async (): Promise<OwnRedis> => {
  const port = freePort()
  let proc: ReturnType<typeof Bun.spawn> | undefined
  const start = async () => {
    proc = Bun.spawn(["redis-server", "--port", String(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"], {
      stdout: "ignore",
      stderr: "ignore",
    })
    for (let i = 0; i < 100; i++) {
      try {
        const socket = await Bun.connect({ hostname: "127.0.0.1", port, socket: { data() {} } })
        socket.end()
        return
      } catch {
        await Bun.sleep(20)
      }
    }
    throw new Error(`redis-server did not start on port ${port}`)
  }
  await start()
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    start,
    pause: () => proc?.kill("SIGSTOP"),
    resume: () => proc?.kill("SIGCONT"),
    stop: async () => {
      proc?.kill("SIGCONT")
      proc?.kill("SIGKILL")
      await proc?.exited
    },
  }
}
