/**
 * Anthropic's rules of a Messages body that the gateway holds before routing (docs/messages.md): an
 * image is one of Anthropic's four types and its base64 source is base64. Each is a 400 naming the
 * field, never forwarded.
 */
import { describe, expect, test } from "bun:test"
import { Either } from "effect"
import { decodeMessagesRequest } from "../../../src/formats/messages/request.js"

const BASE = { model: "acme/model-1", max_tokens: 256 }

const refused = (body: unknown, decode = decodeMessagesRequest): string => {
  const out = decode(body)
  if (Either.isRight(out)) throw new Error(`accepted: ${JSON.stringify(out.right)}`)
  expect(out.left.status).toBe(400)
  return out.left.message
}

const accepted = (body: unknown) => {
  const out = decodeMessagesRequest(body)
  if (Either.isLeft(out)) throw new Error(`refused: ${out.left.message}`)
  return out.right
}

const imageOf = (source: unknown) => ({ ...BASE, messages: [{ role: "user", content: [{ type: "image", source }, { type: "text", text: "what?" }] }] })

describe("Messages image blocks: Anthropic's media types, base64 data", () => {
  test("an image/bmp base64 image is refused naming its media_type and the types taken", () => {
    expect(refused(imageOf({ type: "base64", media_type: "image/bmp", data: "AAAA" }))).toBe(
      "Invalid request: messages[0].content[0].source.media_type: one of image/jpeg, image/png, image/gif, image/webp",
    )
  })

  const NOT_BASE64 = "Invalid request: messages[0].content[0].source.data: base64 data (A-Z, a-z, 0-9, + and /, padded with = to a multiple of 4 characters)"

  test("image data that is not base64 is refused naming source.data", () => {
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: "%%%" }))).toBe(NOT_BASE64)
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: "" }))).toBe(NOT_BASE64)
    // A stray character deep inside megabytes of base64, a length that is no multiple of 4, base64url's alphabet, misplaced padding.
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: `${"A".repeat(1_000_000)}!AAA` }))).toBe(NOT_BASE64)
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: "iVBORw0" }))).toBe(NOT_BASE64)
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: "iVBO-w__" }))).toBe(NOT_BASE64)
    expect(refused(imageOf({ type: "base64", media_type: "image/png", data: "iV==BORw" }))).toBe(NOT_BASE64)
  })

  test("a base64 PDF document whose data is not base64 is refused the same way", () => {
    const body = { ...BASE, messages: [{ role: "user", content: [{ type: "document", source: { type: "base64", media_type: "application/pdf", data: "not base64!" } }] }] }
    expect(refused(body)).toBe(NOT_BASE64)
  })

  test("each of Anthropic's four image types with base64 data (padded or not) is taken as a data URL", () => {
    for (const mediaType of ["image/jpeg", "image/png", "image/gif", "image/webp"]) {
      for (const data of ["iVBORw0KGgo=", "iVBORw==", "iVBORw0K"]) {
        const request = accepted(imageOf({ type: "base64", media_type: mediaType, data }))
        expect((request.input as ReadonlyArray<{ readonly content: ReadonlyArray<unknown> }>)[0].content[0]).toEqual({
          type: "input_image",
          image_url: `data:${mediaType};base64,${data}`,
        })
      }
    }
  })

  test("an image by url is not held to a media type", () => {
    expect(Either.isRight(decodeMessagesRequest(imageOf({ type: "url", url: "https://example.com/a.bmp" })))).toBe(true)
  })
})
