/**
 * A key is found by the SHA-256 of its secret, stored when it was made: the hash must stay
 * exactly SHA-256 in lower-case hex, whatever computes it, or every existing key stops working.
 */
import { expect, test } from "bun:test"
import { createHash } from "node:crypto"
import { hashSecret, newSecret } from "../../src/services/KeyStore.js"

test("hashSecret is SHA-256 of the secret's UTF-8, in lower-case hex", () => {
  for (const secret of [newSecret(), newSecret(), "", "sk-gw-v1-naïve-✓-😀", "x".repeat(10_000)]) {
    expect(hashSecret(secret)).toBe(createHash("sha256").update(secret, "utf8").digest("hex"))
  }
  expect(hashSecret("abc")).toBe("ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
})
