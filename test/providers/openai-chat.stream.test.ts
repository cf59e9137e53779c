/**
 * The Chat Completions stream translator, and its in-place fast path for text chunks: whatever
 * path a chunk takes, the events are the ones a full JSON.parse of it gives.
 */
import { describe, expect, test } from "bun:test"
import { BytePattern, isPlainLiteral, jsonLiteralEnd, jsonStringValue } from "../../src/providers/json-literal"
import { ChatStreamTranslator } from "../../src/providers/openai-chat/stream"
import { ProviderError, type ProviderEvent } from "../../src/providers/types"
import { ResponseAssembler } from "../../src/formats/responses/assembler"
import { literalTexts } from "./helpers"

const HEAD = '{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"m","choices":['
const textChunk = (content: string) => `${HEAD}{"index":0,"delta":{"content":${JSON.stringify(content)}},"finish_reason":null}]}`

const run = (datas: ReadonlyArray<string>, translator = new ChatStreamTranslator()): Array<ProviderEvent> => {
  const out: Array<ProviderEvent> = []
  for (const data of datas) translator.push({ data }, out)
  return out
}

/** What the slow path gives: the text deltas of each chunk, read by JSON.parse. */
const parsedTexts = (datas: ReadonlyArray<string>): Array<string> =>
  datas
    .map((d) => (JSON.parse(d) as { choices: Array<{ delta: { content?: string } }> }).choices[0]?.delta.content ?? "")
    .filter((t) => t.length > 0)

const texts = (events: ReadonlyArray<ProviderEvent>) => events.flatMap(literalTexts).flatMap((e) => (e.type === "text" ? [e.delta] : []))

describe("JSON string literals read in place", () => {
  test("valid literals end after their closing quote, escapes included", () => {
    for (const value of ["", "plain", 'a "quoted" word', "back\\slash", "line\nbreak\ttab\r\f\b", "é ☃ 😀", "\u0000\u001f", "\u2028"]) {
      const literal = JSON.stringify(value)
      const text = `x${literal}tail`
      expect(jsonLiteralEnd(text, 1)).toBe(1 + literal.length)
      expect(jsonStringValue(literal)).toBe(value)
    }
    expect(jsonLiteralEnd('"\\u00e9\\/"', 0)).toBe(10)
    expect(jsonStringValue('"\\u00e9\\/"')).toBe("é/")
  })

  test("a plain literal is printable ASCII with JSON's escapes only; anything else is not", () => {
    const bytes = (text: string) => new TextEncoder().encode(text)
    const plain = ["", "tok ", "a'b{}[]:,~ !", "x".repeat(5000), '\\"q\\"', "a\\\\b", "\\/\\b\\f\\n\\r\\t", "caf\\u00e9", "\\uD83D\\uDE00"]
    for (const inside of plain) {
      expect([inside, isPlainLiteral(bytes(inside), 0, inside.length)]).toEqual([inside, true])
      // What JSON.parse makes of it in quotes: a string, so decoding the run later cannot fail.
      expect(typeof JSON.parse(`"${inside}"`)).toBe("string")
    }
    // Non-ASCII, a control character, DEL, an unknown escape, a short or bad \u, a lone backslash at the end.
    for (const other of ["é", "tab\t", "raw\u0001", "del\u007f", "bad \\q", "\\u12", "\\u12G4", "end\\"]) {
      const b = bytes(other)
      expect([other, isPlainLiteral(b, 0, b.length)]).toEqual([other, false])
    }
    // Within a range of a larger read: the bytes around do not count.
    expect(isPlainLiteral(bytes('é"tok"é'), 3, 6)).toBe(true)
    expect(isPlainLiteral(bytes('"a\\"'), 1, 3)).toBe(false)
  })

  test("BytePattern: found only where every byte matches, within the range's end", () => {
    const encoder = new TextEncoder()
    // Lengths around the 4-byte words it compares, a mismatch at every position.
    for (const length of [1, 3, 4, 5, 8, 11, 141]) {
      const text = Array.from({ length }, (_, i) => String.fromCharCode(33 + ((i * 7) % 90))).join("")
      const pattern = new BytePattern(encoder.encode(text))
      const bytes = encoder.encode(`ab${text}cd`)
      expect(pattern.foundAt(bytes, 2, bytes.length)).toBe(true)
      expect(pattern.foundAt(bytes, 2, 2 + length)).toBe(true)
      // The range ends one byte short; the pattern one byte later or earlier.
      expect(pattern.foundAt(bytes, 2, 1 + length)).toBe(false)
      expect(pattern.foundAt(bytes, 1, bytes.length)).toBe(false)
      expect(pattern.foundAt(bytes, 3, bytes.length)).toBe(false)
      for (let i = 0; i < length; i++) {
        const changed = bytes.slice()
        changed[2 + i] ^= 1
        expect([length, i, pattern.foundAt(changed, 2, changed.length)]).toEqual([length, i, false])
      }
    }
    // Bytes with the high bit set, first in a word too (a word read as a negative number).
    const wide = encoder.encode("é✓ modèle ü{")
    expect(wide[0]).toBeGreaterThanOrEqual(0x80)
    const widePattern = new BytePattern(wide)
    const around = new Uint8Array([1, ...wide, 2])
    expect(widePattern.foundAt(around, 1, around.length)).toBe(true)
    for (let i = 0; i < wide.length; i++) {
      const changed = around.slice()
      changed[1 + i] ^= 0x80
      expect([i, widePattern.foundAt(changed, 1, changed.length)]).toEqual([i, false])
    }
    // Views at any offset of a larger buffer, one after another (the shared view is per bytes).
    const pattern = new BytePattern(encoder.encode("data: {"))
    const whole = encoder.encode("xxdata: {yydata: {")
    expect(pattern.foundAt(whole.subarray(2), 0, 16)).toBe(true)
    expect(pattern.foundAt(whole.subarray(1), 0, 17)).toBe(false)
    expect(pattern.foundAt(whole.subarray(11), 0, 7)).toBe(true)
  })

  test("anything JSON refuses is refused", () => {
    for (const bad of ['"raw\nbreak"', '"tab\there"', '"bad \\x escape"', '"short \\u12"', '"\\u12G4"', '"unterminated', '"ends in \\"', "no quote"]) {
      expect(jsonLiteralEnd(bad, 0)).toBe(-1)
      expect(jsonStringValue(bad)).toBeUndefined()
      expect(() => JSON.parse(bad)).toThrow()
    }
    // JSON of something else than a string, or more than one value, is no string either.
    for (const other of ["5", "null", "[]", '{"a":"b"}', '"a","content":"b"', '"a"}']) expect(jsonStringValue(other)).toBeUndefined()
  })
})

describe("Chat Completions stream translator", () => {
  test("text chunks after the first are read in place and forwarded as their own literal", () => {
    const contents = ["Hello", " wor\\ld", ' "q"', "\n", "é😀", "", "\u2028x", "end"]
    const datas = contents.map(textChunk)
    const events = run(datas)
    expect(texts(events)).toEqual(parsedTexts(datas))
    // Chunks after the first carry the upstream's literal, which decodes to the delta.
    const later = events.slice(1)
    expect(later.length).toBeGreaterThan(0)
    for (const e of later) {
      if (e.type !== "text") throw new Error("text expected")
      expect(e.json).toBeDefined()
      expect(JSON.parse(e.json as string)).toBe(e.delta)
    }
  })

  test("literals escaped differently than JSON.stringify would still decode to the same text", () => {
    const datas = [textChunk("a"), `${HEAD}{"index":0,"delta":{"content":"caf\\u00e9 \\/ ok"},"finish_reason":null}]}`]
    const events = run(datas)
    expect(texts(events)).toEqual(["a", "café / ok"])
    expect(events[1]).toEqual({ type: "text", delta: "café / ok", json: '"caf\\u00e9 \\/ ok"' })
  })

  test("random deltas: the same events as parsing every chunk", () => {
    const alphabet = ["a", "b", " ", '"', "\\", "\n", "\t", "\u0001", "é", "😀", "\u2028", "/", "{", "}", ","]
    let seed = 7
    const next = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff
      return seed
    }
    for (let round = 0; round < 200; round++) {
      const datas = Array.from({ length: 1 + (next() % 12) }, () =>
        textChunk(Array.from({ length: next() % 6 }, () => alphabet[next() % alphabet.length]).join("")),
      )
      expect(texts(run(datas))).toEqual(parsedTexts(datas))
    }
  })

  test("a tool call without an upstream id gets an id of its own, different in every turn", () => {
    const toolChunk = (call: string) => `${HEAD}{"index":0,"delta":{"tool_calls":[${call}]},"finish_reason":null}]}`
    const turn = () =>
      run([
        toolChunk('{"index":0,"function":{"name":"get_weather","arguments":"{}"}}'),
        toolChunk('{"index":1,"id":"","function":{"name":"get_time","arguments":"{}"}}'),
        toolChunk('{"index":2,"id":"call_up","function":{"name":"ping","arguments":"{}"}}'),
      ]).flatMap((e) => (e.type === "tool_call_start" ? [e.callId] : []))
    const first = turn()
    const second = turn()
    expect(first[0]).toMatch(/^call_[0-9a-f]{24}$/)
    expect(first[1]).toMatch(/^call_[0-9a-f]{24}$/)
    expect(first[2]).toBe("call_up")
    expect(new Set([...first.slice(0, 2), ...second.slice(0, 2)]).size).toBe(4)
  })

  test("chunks that differ around the literal take the full parse: finish, usage, another id, tool calls", () => {
    const translator = new ChatStreamTranslator()
    const events = run(
      [
        textChunk("one"),
        textChunk("two"),
        textChunk("three").replace("chatcmpl-1", "chatcmpl-2"),
        `${HEAD}{"index":0,"delta":{"content":"four"},"finish_reason":"length"}]}`,
        `${HEAD}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
        "[DONE]",
      ],
      translator,
    )
    expect(events).toEqual([
      { type: "text", delta: "one" },
      { type: "text", delta: "two", json: '"two"' },
      { type: "text", delta: "three" },
      { type: "text", delta: "four" },
      { type: "usage", usage: { inputTokens: 3, cachedTokens: 0, cacheWriteTokens: 0, outputTokens: 4, reasoningTokens: 0 } },
      { type: "finish", reason: "length" },
    ])
    expect(translator.done).toBe(true)
  })

  test("a chunk that matches the template but is not valid JSON fails as it would have", () => {
    const translator = new ChatStreamTranslator()
    run([textChunk("ok")], translator)
    const broken = `${HEAD}{"index":0,"delta":{"content":"raw\u0001control"},"finish_reason":null}]}`
    expect(() => run([broken], translator)).toThrow(ProviderError)
    const badEscape = `${HEAD}{"index":0,"delta":{"content":"bad \\q"},"finish_reason":null}]}`
    expect(() => run([badEscape], translator)).toThrow(ProviderError)
  })

  test("an error event with the same text is an error, not a delta", () => {
    const translator = new ChatStreamTranslator()
    run([textChunk("ok")], translator)
    expect(() => translator.push({ event: "error", data: textChunk("x") }, [])).toThrow(ProviderError)
  })

  test("a chunk with a second content key is not learned: JSON.parse keeps the last key", () => {
    const dup = (first: string) => `${HEAD}{"index":0,"delta":{"content":"${first}","content":"b"},"finish_reason":null}]}`
    expect(texts(run([dup("b"), dup("x"), dup("y")]))).toEqual(["b", "b", "b"])
  })

  test("a literal that is not choices[0].delta.content is never learned, however the chunk hides it", () => {
    // Each case: the first chunk has the same value in the decoy and the real content, so a
    // template pinned to the decoy would pass the value check; later chunks differ in the decoy.
    const cases: Array<(x: string) => string> = [
      // Two choices; choice 0 names its role first, so the first `"delta":{"content":` is choice 1's.
      (x) => `{"choices":[{"index":0,"delta":{"role":"assistant","content":"The"},"finish_reason":null},{"index":1,"delta":{"content":${x}},"finish_reason":null}]}`,
      // A nested decoy, the real key written with a space.
      (x) => `{"choices":[{"delta":{ "content":"a","meta":{"delta":{"content":${x}}}}}]}`,
      // A later duplicate of the key, escaped so its raw text is not "content".
      (x) => `{"choices":[{"delta":{"content":${x},"\u0063ontent":"a"}}]}`,
      // The real delta key escaped, a decoy after the choices.
      (x) => `{"choices":[{"\u0064elta":{"content":"a"}}],"x":{"delta":{"content":${x}}}}`,
      // A decoy before the choices, in an object of its own.
      (x) => `{"x":{"choices":[{"delta":{"content":${x}}}]},"choices":[{"delta":{"content":"a"}}]}`,
    ]
    for (const chunk of cases) {
      const first = JSON.parse(chunk('"a"')) as { choices: Array<{ delta: { content: string } }> }
      const datas = [chunk(JSON.stringify(first.choices[0]?.delta.content ?? "a")), chunk('"b"'), chunk('"EVIL"')]
      expect(texts(run(datas))).toEqual(parsedTexts(datas))
    }
  })

  test("reasoning, tool calls and usage in a chunk keep it out of the template", () => {
    const reasoning = `${HEAD}{"index":0,"delta":{"content":"a","reasoning_content":"r"},"finish_reason":null}]}`
    const events = run([reasoning, reasoning.replace('"a"', '"b"')])
    expect(events).toEqual([
      { type: "reasoning", delta: "r" },
      { type: "text", delta: "a" },
      { type: "reasoning", delta: "r" },
      { type: "text", delta: "b" },
    ])
  })

  test("the assembler writes the upstream literal into the delta event", () => {
    const assembler = new ResponseAssembler({ id: "resp_1", created_at: 1, model: "m" }, {
      stream: true,
      newId: (prefix) => `${prefix}_1`,
    })
    assembler.start()
    const text = assembler.push([{ type: "text", delta: "é", json: '"\\u00e9"' }])
    if (typeof text !== "string") throw new Error("text events alone give text")
    expect(text).toContain('"delta":"\\u00e9"')
    const data = text
      .split("\n")
      .filter((l) => l.startsWith("data: "))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; delta?: string })
    expect(data.find((d) => d.type === "response.output_text.delta")?.delta).toBe("é")
    expect(assembler.completionText).toBe("é")
  })
})

describe("Chat Completions text events read from the upstream bytes (pushBytes)", () => {
  const encoder = new TextEncoder()
  const framed = (...datas: ReadonlyArray<string>) => encoder.encode(datas.map((d) => `data: ${d}\n\n`).join(""))
  const learned = () => {
    const translator = new ChatStreamTranslator()
    run([textChunk("first")], translator)
    return translator
  }

  test("nothing is taken before a text chunk was parsed in full", () => {
    const translator = new ChatStreamTranslator()
    const out: Array<ProviderEvent> = []
    expect(translator.pushBytes(framed(textChunk("a")), 0, framed(textChunk("a")).length, out)).toBe(0)
    expect(out).toEqual([])
  })

  test("whole events of the learned shape are taken in order, each literal as it came", () => {
    const translator = learned()
    const contents = ["Hello", ' "q" ', "é😀", "", "\n\\", "\u2028"]
    const bytes = framed(...contents.map(textChunk), `${HEAD}{"index":0,"delta":{"content":"caf\\u00e9"},"finish_reason":null}]}`)
    const out: Array<ProviderEvent> = []
    expect(translator.pushBytes(bytes, 0, bytes.length, out)).toBe(bytes.length)
    expect(texts(out)).toEqual([...contents.filter((c) => c !== ""), "café"])
    for (const e of out) if (e.type === "text") expect(JSON.parse(e.json as string)).toBe(e.delta)
    // Plain literals in runs, in place in the read (the empty one dropped); the others decoded.
    expect(out.map((e) => e.type)).toEqual(["text_literals", "text", "text_literals", "text", "text_literals"])
    expect(out.flatMap(literalTexts).map((e) => (e.type === "text" ? e.json : e.type))).toEqual([
      '"Hello"',
      '" \\"q\\" "',
      '"é😀"',
      '"\\n\\\\"',
      '"\u2028"',
      '"caf\\u00e9"',
    ])
    const last = out.at(-1)
    if (last?.type !== "text_literals") throw new Error("a run expected last")
    expect(last.source).toBe(bytes)
  })

  test("a read given event by event (an HTTP chunk each) makes one run; another read or an event between starts a new one", () => {
    const translator = learned()
    const events = [textChunk("a"), textChunk("b"), textChunk("é"), textChunk("c"), textChunk("d")]
    const bytes = framed(...events)
    const ends = events.map((_, i) => framed(...events.slice(0, i + 1)).length)
    const out: Array<ProviderEvent> = []
    let from = 0
    for (const end of ends) {
      expect(translator.pushBytes(bytes, from, end, out)).toBe(end)
      from = end
    }
    expect(out.map((e) => e.type)).toEqual(["text_literals", "text", "text_literals"])
    expect(texts(out)).toEqual(["a", "b", "é", "c", "d"])
    // The next read, into the same batch: a run of its own, in its own bytes.
    const next = framed(textChunk("e"))
    translator.pushBytes(next, 0, next.length, out)
    expect(out.map((e) => e.type)).toEqual(["text_literals", "text", "text_literals", "text_literals"])
    const last = out.at(-1)
    if (last?.type !== "text_literals") throw new Error("a run expected last")
    expect(last.source).toBe(next)
    expect(texts(out)).toEqual(["a", "b", "é", "c", "d", "e"])
  })

  test("it stops at the first byte that is not a whole event of that shape, and says where", () => {
    const translator = learned()
    const two = framed(textChunk("a"), textChunk("b"))
    const oneLength = framed(textChunk("a")).length
    const cases: Array<[string, Uint8Array, number]> = [
      ["an event cut short", two.subarray(0, two.length - 3), oneLength],
      ["a cut inside the literal", framed(textChunk("abcdef")).subarray(0, 150), 0],
      ["CRLF framing", encoder.encode(`data: ${textChunk("a")}\r\n\r\n`), 0],
      ["no space after data:", encoder.encode(`data:${textChunk("a")}\n\n`), 0],
      ["an event: line", encoder.encode(`event: error\ndata: ${textChunk("a")}\n\n`), 0],
      ["a comment", encoder.encode(`: ping\n\n${`data: ${textChunk("a")}\n\n`}`), 0],
      ["another id", framed(textChunk("a").replace("chatcmpl-1", "chatcmpl-2")), 0],
      ["a finish reason", framed(`${HEAD}{"index":0,"delta":{"content":"a"},"finish_reason":"stop"}]}`), 0],
      ["a bad escape", framed(`${HEAD}{"index":0,"delta":{"content":"bad \\q"},"finish_reason":null}]}`), 0],
      ["a raw control character", framed(`${HEAD}{"index":0,"delta":{"content":"a\u0001b"},"finish_reason":null}]}`), 0],
      ["two values in the literal's place", framed(`${HEAD}{"index":0,"delta":{"content":"a","x":"b"},"finish_reason":null}]}`), 0],
      ["the terminal [DONE]", framed("[DONE]"), 0],
    ]
    for (const [name, bytes, stop] of cases) {
      const out: Array<ProviderEvent> = []
      expect([name, translator.pushBytes(bytes, 0, bytes.length, out)]).toEqual([name, stop])
      expect([name, out.length]).toEqual([name, stop === 0 ? 0 : 1])
    }
    // From an offset: the second event of two.
    const out: Array<ProviderEvent> = []
    expect(translator.pushBytes(two, oneLength, two.length, out)).toBe(two.length)
    expect(texts(out)).toEqual(["b"])
    // A range that ends inside the second event: only the first is taken, whatever follows the range.
    const cut: Array<ProviderEvent> = []
    expect(translator.pushBytes(two, 0, two.length - 3, cut)).toBe(oneLength)
    expect(texts(cut)).toEqual(["a"])
    expect(translator.pushBytes(two, 0, oneLength - 1, [])).toBe(0)
  })
})
