/**
 * The IPC between `serve --workers`'s supervisor (src/supervisor.ts) and its worker processes:
 * what a worker says (listening, a notice for its siblings, its metrics) and hears.
 */

/** Messages between the supervisor and its workers (IPC, structured clone). */
export type SupervisorMessage =
  | { readonly t: "ready" }
  | { readonly t: "notice"; readonly text: string }
  | { readonly t: "metrics-request"; readonly id: number }
  | { readonly t: "metrics"; readonly id: number; readonly text: string }

/** In a worker: the IPC side (undefined when this process is no supervisor's worker). */
export const workerChannel = (): { readonly index: number; readonly total: number; readonly send: (m: SupervisorMessage) => void } | undefined => {
  const index = process.env["GATEWAY_WORKER_INDEX"]
  if (index === undefined || typeof process.send !== "function") return undefined
  const send = process.send.bind(process)
  return { index: Number(index), total: Number(process.env["GATEWAY_WORKERS_TOTAL"] ?? "1"), send: (m) => void send(m) }
}

/**
 * The instance ids of stopped workers whose ledger spools this worker takes over at start
 * (`GATEWAY_ADOPT_SPOOLS`, set by the supervisor only: comma-separated, file-name safe).
 */
export const adoptedSpoolIds = (): ReadonlyArray<string> =>
  (process.env["GATEWAY_ADOPT_SPOOLS"] ?? "").split(",").filter((id) => /^[A-Za-z0-9._-]+$/.test(id))
