/** For the tests of the safe outbound fetcher (src/outbound/fetch.ts): local servers to fetch from, and the refusal a fetch ended in. */
import { afterAll } from "bun:test"
import { OutboundError } from "../../src/outbound/fetch.js"

/** Serves `fetch` on a free loopback port until the test file ends. */
export const useLocalServers = () => {
  const servers: Array<{ stop: (force?: boolean) => void }> = []
  afterAll(() => {
    for (const s of servers) s.stop(true)
  })
  return (fetch: (req: Request) => Response | Promise<Response>) => {
    const server = Bun.serve({ port: 0, hostname: "127.0.0.1", fetch })
    servers.push(server)
    return server
  }
}

/** The `OutboundError` `p` failed with (anything else it throws, or its success, fails the test). */
export const failure = async (p: Promise<unknown>): Promise<OutboundError> => {
  try {
    await p
  } catch (e) {
    if (e instanceof OutboundError) return e
    throw e
  }
  throw new Error("expected the request to fail")
}
