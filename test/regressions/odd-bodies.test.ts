/** REVIEW: bodies that are valid JSON but not a request object, and other caller mistakes: a 4xx in the envelope naming the field, or a plain answer where the body is a request after all. */
import { describe, expect, test } from "bun:test"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const post = (body: string, headers: Record<string, string> = {}) =>
  gw().fetch("/v1/responses", { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

/** Each body, the status it is answered with, and (for a refusal) the words of the message that name the field and the rule. */
const CASES: ReadonlyArray<readonly [body: string, status: number, names?: string]> = [
  ["null", 400, "the body must be a JSON object"],
  ["[]", 400, "the body must be a JSON object"],
  ["1", 400, "the body must be a JSON object"],
  ['"x"', 400, "the body must be a JSON object"],
  ["true", 400, "the body must be a JSON object"],
  ["{}", 400, "input: is missing"],
  ['{"model":null}', 400, "model: Expected string"],
  ['{"model":"demo/echo","input":null}', 400, "input: a string or an array of input items"],
  ['{"model":"demo/echo","input":[null]}', 400, "input[0]: an input item object"],
  ['{"model":"demo/echo","input":[1]}', 400, "input[0]: an input item object"],
  ['{"model":"demo/echo","tools":[null]}', 400, "tools[0]: a tool object with a type"],
  ['{"model":"demo/echo","input":"hi","max_output_tokens":-1}', 400, "max_output_tokens: an integer of at least 1"],
  // Types in words, not as TypeScript writes them (`ReadonlyArray<string>`, `{ readonly … }`).
  ['{"model":"demo/echo","input":"hi","metadata":[]}', 400, "metadata: Expected an object, actual []"],
  ['{"model":"demo/echo","input":"hi","provider":{"order":"x"}}', 400, 'provider.order: Expected an array of strings, actual "x"'],
  ['{"model":"demo/echo","input":"hi","plugins":"x"}', 400, 'plugins: Expected an array, actual "x"'],
  // null is "no preferences", as an absent field.
  ['{"model":"demo/echo","input":"hi","provider":null}', 200],
  ['{"model":"demo/echo","input":"hi","provider":{"order":[null]}}', 400, "provider.order[0]: Expected string"],
  ['{"model":"demo/echo","input":"hi","text":{"format":null}}', 400, "text.format: a format object with a type"],
  ['{"model":"demo/echo","input":"hi","reasoning":{"effort":"x"}}', 400, "reasoning.effort: one of"],
  ['{"model":"demo/echo","input":[{"type":"message","role":"user","content":[null]}]}', 400, "input[0].content[0]: a content part object"],
  [
    '{"model":"demo/echo","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]}',
    400,
    "input[0].output[0]: only text parts",
  ],
  ['{"model":"demo/echo","input":"hi","preset":"nope"}', 404, 'Preset "nope" does not exist (named by preset)'],
  ['{"model":"@preset/nope","input":"hi"}', 404, 'Preset "nope" does not exist (named by model)'],
  ['{"model":"demo/echo","input":"hi","session_id":1}', 400, "session_id: Expected string"],
  ['{"model":"demo/echo","input":"hi","tool_choice":{"type":"web_search"}}', 400, 'tool_choice: type "web_search" cannot be sent'],
  ['{"model":"demo/echo","input":"hi","stream":"yes"}', 400, "stream: Expected boolean"],
  // A key named like a prototype is an unknown field: it neither streams the answer nor breaks the parse.
  ['{"model":"demo/echo","input":"hi","__proto__":{"stream":true}}', 200],
  ['{"model":"demo/echo","input":"hi","constructor":{"prototype":1}}', 200],
]

describe("odd bodies on POST /v1/responses", () => {
  for (const [body, status, names] of CASES) {
    test(`${body.slice(0, 90)} is answered ${status}`, async () => {
      const res = await post(body)
      const text = await res.text()
      // The body rides along so a wrong status shows what was answered.
      expect({ status: res.status, body: text.slice(0, 300) }).toMatchObject({ status })
      const json = JSON.parse(text) as { error?: { code?: unknown; message?: unknown }; user_id?: unknown; object?: unknown; status?: unknown }
      if (names === undefined) {
        expect(res.headers.get("content-type")).toContain("application/json")
        expect([json.object, json.status]).toEqual(["response", "completed"])
      } else {
        expect(json.error?.code).toBe(status)
        expect(json.error?.message).toContain(names)
        expect("user_id" in json).toBe(true)
      }
    })
  }
})
