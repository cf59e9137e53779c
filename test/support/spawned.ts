/** A gateway process spawned by a test: its URL once it says it is listening. */

/** Reads the process's stdout until the "listening on" line; keeps draining it after (a full pipe would block the process). */
export const untilListening = async (proc: { readonly stdout: unknown }, what = "the gateway"): Promise<string> => {
  const reader = (proc.stdout as ReadableStream<Uint8Array>).getReader()
  const decoder = new TextDecoder()
  let out = ""
  for (;;) {
    const { done, value } = await reader.read()
    if (done) throw new Error(`${what} exited before listening: ${out}`)
    out += decoder.decode(value, { stream: true })
    const match = /listening on (http:\/\/[\d.]+:\d+)\/v1/.exec(out)
    if (match !== null) {
      void (async () => {
        while (!(await reader.read()).done) {}
      })()
      return match[1] as string
    }
  }
}
