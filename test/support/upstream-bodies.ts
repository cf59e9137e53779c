/** What a mock upstream was sent while a call ran: for tests of what reaches (or does not reach) a provider. */
import type { MockUpstream } from "../../scripts/mock-upstream.js"

/** The bodies `mock` was sent while `call` ran, with the call's response. */
export const sentDuring = async (mock: MockUpstream, call: () => Promise<Response>) => {
  const from = mock.requests.length
  const res = await call()
  return { res, sent: mock.requests.slice(from).map((r) => r.body as Record<string, unknown>) }
}
