/** Helper of early-disconnect.test.ts (a separate process, so its timers run while the server is busy). */
import net from "node:net"

const [port, key, closeMs] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4])]
const items = Array.from({ length: 50_000 }, (_, i) => ({ role: "user", content: `w${i}` }))
const body = JSON.stringify({
  model: "demo/echo",
  provider: { order: ["fake"] },
  input: [...items, { role: "user", content: "one two three four five six [slow:100]" }],
})
const s = net.connect(port, "127.0.0.1", () => {
  s.write(
    `POST /v1/responses HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${key}\r\ncontent-type: application/json\r\n` +
      `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    () => setTimeout(() => s.destroy(), closeMs),
  )
})
s.on("error", () => {})
s.on("close", () => process.exit(0))
