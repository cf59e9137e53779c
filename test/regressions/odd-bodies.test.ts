/** REVIEW: bodies that are valid JSON but not a request object, and other caller mistakes: always a 4xx in the envelope. */
import { describe, expect, test } from "bun:test"
import { useInProcessGateway } from "../support/gateway.js"

const gw = useInProcessGateway()

const post = (body: string, headers: Record<string, string> = {}) =>
  gw().fetch("/v1/responses", { method: "POST", headers: { "content-type": "application/json", ...headers }, body })

describe("odd bodies on POST /v1/responses", () => {
  for (const body of ["null", "[]", "1", '"x"', "true", "{}", '{"model":null}', '{"model":"demo/echo","input":null}',
    '{"model":"demo/echo","input":[null]}', '{"model":"demo/echo","input":[1]}', '{"model":"demo/echo","tools":[null]}',
    '{"model":"demo/echo","input":"hi","max_output_tokens":-1}', '{"model":"demo/echo","input":"hi","metadata":[]}',
    '{"model":"demo/echo","input":"hi","provider":null}', '{"model":"demo/echo","input":"hi","provider":{"order":[null]}}',
    '{"model":"demo/echo","input":"hi","text":{"format":null}}', '{"model":"demo/echo","input":"hi","reasoning":{"effort":"x"}}',
    '{"model":"demo/echo","input":[{"type":"message","role":"user","content":[null]}]}',
    '{"model":"demo/echo","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"x"}]}]}',
    '{"model":"demo/echo","input":"hi","preset":"nope"}', '{"model":"@preset/nope","input":"hi"}',
    '{"model":"demo/echo","input":"hi","session_id":1}', '{"model":"demo/echo","input":"hi","tool_choice":{"type":"web_search"}}',
    '{"model":"demo/echo","input":"hi","stream":"yes"}', '{"model":"demo/echo","input":"hi","__proto__":{"stream":true}}',
    '{"model":"demo/echo","input":"hi","constructor":{"prototype":1}}',
  ]) {
    test(body.slice(0, 90), async () => {
      const res = await post(body)
      const text = await res.text()
      let json: { error?: { code?: unknown; message?: unknown }; user_id?: unknown } = {}
      try {
        json = JSON.parse(text)
      } catch {}

      expect(res.status === 200 || (res.status >= 400 && res.status < 500)).toBe(true)
      if (res.status !== 200) {
        expect(json.error?.code).toBe(res.status)
        expect(typeof json.error?.message).toBe("string")
        expect("user_id" in json).toBe(true)
      }
    })
  }
})
