/** A gateway process spawned by a test: its URL once it says it is listening. */

/**
 * Reads the process's stdout until the "listening on" line: the URL it names and all it wrote so
 * far. Keeps draining it after (a full pipe would block the process).
 */
export const readUntilListening = async (proc: { readonly stdout: unknown }, what = "the gateway"): Promise<{ url: string; out: string }> => {
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
      return { url: match[1] as string, out }
    }
  }
}

/** The URL of the gateway `proc` runs, once it says it is listening. */
export const untilListening = async (proc: { readonly stdout: unknown }, what = "the gateway"): Promise<string> =>
  (await readUntilListening(proc, what)).url
