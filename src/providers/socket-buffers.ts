/**
 * Kernel socket buffer sizes (`SO_SNDBUF`, `SO_RCVBUF`) and the send queue's unsent low-water
 * mark (`TCP_NOTSENT_LOWAT`), which Bun does not expose: set through libc with `bun:ffi`, on Linux.
 *
 * Why (measured, 100 clients that open ~4 MB streams and never read, loopback): with
 * the kernel's autotuning, a client connection's send buffer grows to `net.ipv4.tcp_wmem`'s
 * maximum (4 MB), so the gateway translated ~3.9 MB of each answer before its first write
 * waited, and kept that text for the answer's terminal events (`response.completed` carries the
 * whole output): +4.7 MB of RSS per stream. An upstream connection's receive buffer grew the same
 * way, so one read of a fast upstream was Bun's whole 512 KB read buffer, held in full by a stream
 * paused part way through it. With the sizes fixed, what a paused stream holds is bounded by them.
 *
 * The unsent low-water mark bounds the part of a client connection's send queue that is not on
 * its way yet (a client that reads nothing has a closed window, so that is all of what it has not
 * taken into its own receive buffer): with a mark, a write is refused once the unsent bytes are
 * over it (give or take one segment of up to 64 KB), whatever the send buffer's size. 500 such
 * streams with a 32 KB send buffer: ~71 KB queued each, ~36 KB with a 16 KB mark.
 */
import { dlopen, FFIType, ptr } from "bun:ffi"
import { readdirSync, readFileSync, readlinkSync } from "node:fs"

const SOL_SOCKET = 1
const SO_SNDBUF = 7
const SO_RCVBUF = 8
const IPPROTO_TCP = 6
const TCP_NOTSENT_LOWAT = 25
/** `/proc/net/tcp`'s state of a listening socket. */
const TCP_LISTEN = "0A"

type SetSockOpt = (fd: number, level: number, option: number, value: ReturnType<typeof ptr>, length: number) => number

let setsockopt: SetSockOpt | null | undefined
/** libc's `setsockopt`, opened once; null where there is none to open (not Linux, or no glibc). */
const libcSetsockopt = (): SetSockOpt | null => {
  if (setsockopt !== undefined) return setsockopt
  setsockopt = null
  if (process.platform !== "linux") return null
  try {
    const libc = dlopen("libc.so.6", {
      setsockopt: { args: [FFIType.i32, FFIType.i32, FFIType.i32, FFIType.ptr, FFIType.u32], returns: FFIType.i32 },
    })
    setsockopt = libc.symbols.setsockopt as SetSockOpt
  } catch {
    // musl or an unusual libc: the kernel's defaults stay.
  }
  return setsockopt
}

const setOption = (fd: number, level: number, option: number, value: number): boolean => {
  const set = libcSetsockopt()
  if (set === null) return false
  const holder = new Int32Array([value])
  return set(fd, level, option, ptr(holder), 4) === 0
}

const setBufferSize = (fd: number, option: number, bytes: number): boolean => setOption(fd, SOL_SOCKET, option, bytes)

/**
 * Fixes the receive buffer of a connected socket (the kernel doubles `bytes` for its own
 * bookkeeping); false when it could not be set. Set before the answer comes, it bounds a read.
 */
export const setReceiveBuffer = (fd: number, bytes: number): boolean => setBufferSize(fd, SO_RCVBUF, bytes)

/** The descriptors of this process's TCP sockets listening on `port` (Linux `/proc`). */
const listeningDescriptors = (port: number): Array<number> => {
  const inodes = new Set<string>()
  for (const table of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    let text: string
    try {
      text = readFileSync(table, "utf8")
    } catch {
      continue
    }
    for (const line of text.split("\n").slice(1)) {
      // sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
      const columns = line.trim().split(/\s+/)
      const local = columns[1]
      if (columns.length < 10 || local === undefined || columns[3] !== TCP_LISTEN) continue
      if (Number.parseInt(local.slice(local.lastIndexOf(":") + 1), 16) === port) inodes.add(columns[9] as string)
    }
  }
  const found: Array<number> = []
  if (inodes.size === 0) return found
  for (const name of readdirSync("/proc/self/fd")) {
    let target: string
    try {
      target = readlinkSync(`/proc/self/fd/${name}`)
    } catch {
      continue
    }
    const inode = /^socket:\[(\d+)\]$/.exec(target)?.[1]
    if (inode !== undefined && inodes.has(inode)) found.push(Number(name))
  }
  return found
}

/** Sets an option on the server's listening sockets on `port`, which the connections it accepts from now on inherit. Returns why not, or undefined once set. */
const setOnListening = (port: number, level: number, option: number, value: number, name: string): string | undefined => {
  if (libcSetsockopt() === null) return "setsockopt is not reachable here (Linux with glibc only)"
  let descriptors: Array<number>
  try {
    descriptors = listeningDescriptors(port)
  } catch (cause) {
    return `the listening socket could not be found: ${cause instanceof Error ? cause.message : String(cause)}`
  }
  if (descriptors.length === 0) return `no listening socket on port ${port} was found in /proc`
  for (const fd of descriptors) if (!setOption(fd, level, option, value)) return `setsockopt(${name}) failed on descriptor ${fd}`
  return undefined
}

/**
 * Fixes the send buffer of every connection the server on `port` accepts from now on (set on the
 * listening socket, which accepted sockets inherit). Returns why not, or undefined once set.
 */
export const limitSendBuffers = (port: number, bytes: number): string | undefined => setOnListening(port, SOL_SOCKET, SO_SNDBUF, bytes, "SO_SNDBUF")

/**
 * Sets the unsent low-water mark (`TCP_NOTSENT_LOWAT`) of every connection the server on `port`
 * accepts from now on, as `limitSendBuffers` does. Returns why not, or undefined once set.
 */
export const limitUnsentBytes = (port: number, bytes: number): string | undefined =>
  setOnListening(port, IPPROTO_TCP, TCP_NOTSENT_LOWAT, bytes, "TCP_NOTSENT_LOWAT")
