/** A Google service account for the vertex tests: an RSA key made here, its JSON key file, and the public key the fake token endpoint verifies with. */
import { mkdtempSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const SERVICE_ACCOUNT_EMAIL = "gateway@proj.iam.gserviceaccount.com"

export const newKeyPair = () =>
  crypto.subtle.generateKey({ name: "RSASSA-PKCS1-v1_5", modulusLength: 2048, publicExponent: new Uint8Array([1, 0, 1]), hash: "SHA-256" }, true, [
    "sign",
    "verify",
  ]) as Promise<CryptoKeyPair>

export const pemOf = async (key: CryptoKey): Promise<string> => {
  const der = Buffer.from(await crypto.subtle.exportKey("pkcs8", key)).toString("base64")
  return `-----BEGIN PRIVATE KEY-----\n${der.match(/.{1,64}/g)?.join("\n")}\n-----END PRIVATE KEY-----\n`
}

export interface ServiceAccount {
  readonly dir: string
  readonly file: string
  readonly privatePem: string
  readonly publicKey: CryptoKey
}

/** A key pair and its service-account JSON file in a new temporary folder. */
export const makeServiceAccount = async (): Promise<ServiceAccount> => {
  const dir = mkdtempSync(join(tmpdir(), "vertex-test-"))
  const pair = await newKeyPair()
  const privatePem = await pemOf(pair.privateKey)
  const file = join(dir, "key.json")
  writeFileSync(file, JSON.stringify({ type: "service_account", client_email: SERVICE_ACCOUNT_EMAIL, private_key: privatePem, private_key_id: "kid-1" }))
  return { dir, file, privatePem, publicKey: pair.publicKey }
}
