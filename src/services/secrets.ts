/**
 * Encryption at rest for the secrets we must be able to read back (observability
 * destinations' credentials). AES-256-GCM with a random 96-bit IV per value; the key is
 * SHA-256 of `GATEWAY_SECRET_KEY`, or of a random secret generated into
 * `${GATEWAY_DATA_DIR}/secret.key` (mode 0600) on the first start and read from there after.
 * Losing that file (or changing the variable) makes the stored secrets unreadable.
 */
import { createCipheriv, createDecipheriv, createHash, randomBytes } from "node:crypto"
import { linkSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { join } from "node:path"
import { Data, Effect, Either, Option, Redacted } from "effect"
import { ConfigFileError, GatewayConfig } from "../config/Config.js"

/** Sealed values start with this, so a sealed value is never mistaken for a plain one. */
export const SEALED_PREFIX = "enc:v1:"

export class SecretDecryptError extends Data.TaggedError("SecretDecryptError")<{ readonly message: string }> {}

export const SECRET_KEY_FILE = "secret.key"

/**
 * The key file's secret, created (0600) when absent; concurrent first starts agree on one file.
 * The secret is written whole to a file of this process's own, then linked into place: link fails
 * when the name exists, and a process that finds it reads a complete file (an exclusive create
 * of the name itself let another start read it empty before it was written).
 */
export const keyFileSecret = (dataDir: string) =>
  Effect.try({
    try: () => {
      const path = join(dataDir, SECRET_KEY_FILE)
      mkdirSync(dataDir, { recursive: true })
      const draft = `${path}.${process.pid}.${randomBytes(6).toString("hex")}`
      writeFileSync(draft, `${randomBytes(32).toString("hex")}\n`, { flag: "wx", mode: 0o600 })
      try {
        linkSync(draft, path)
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e
      } finally {
        rmSync(draft, { force: true })
      }
      const secret = readFileSync(path, "utf8").trim()
      if (secret === "") throw new Error("the file is empty")
      return secret
    },
    catch: (e) =>
      new ConfigFileError({
        message: `${join(dataDir, SECRET_KEY_FILE)}: cannot create or read the secret key (${(e as Error).message}); set GATEWAY_SECRET_KEY or fix GATEWAY_DATA_DIR`,
      }),
  })

/** AES-256-GCM sealing with a key derived from any string. Pure functions over strings. */
export const makeSealer = (material: string) => {
  const key = createHash("sha256").update(material, "utf8").digest()

  const seal = (plain: string): string => {
    const iv = randomBytes(12)
    const cipher = createCipheriv("aes-256-gcm", key, iv)
    const body = Buffer.concat([cipher.update(plain, "utf8"), cipher.final(), cipher.getAuthTag()])
    return `${SEALED_PREFIX}${iv.toString("base64url")}:${body.toString("base64url")}`
  }

  const open = (sealed: string): Either.Either<string, SecretDecryptError> => {
    if (!sealed.startsWith(SEALED_PREFIX)) return Either.left(new SecretDecryptError({ message: "not a sealed value" }))
    const [ivText, bodyText] = sealed.slice(SEALED_PREFIX.length).split(":")
    try {
      const iv = Buffer.from(ivText ?? "", "base64url")
      const body = Buffer.from(bodyText ?? "", "base64url")
      if (iv.length !== 12 || body.length < 16) throw new Error("truncated")
      const decipher = createDecipheriv("aes-256-gcm", key, iv)
      decipher.setAuthTag(body.subarray(body.length - 16))
      return Either.right(Buffer.concat([decipher.update(body.subarray(0, body.length - 16)), decipher.final()]).toString("utf8"))
    } catch {
      return Either.left(
        new SecretDecryptError({
          message: "a stored secret cannot be decrypted (was GATEWAY_SECRET_KEY or the secret.key file changed?)",
        }),
      )
    }
  }

  return { seal, open, isSealed: (value: string) => value.startsWith(SEALED_PREFIX) } as const
}

export class Secrets extends Effect.Service<Secrets>()("Secrets", {
  effect: Effect.gen(function* () {
    const settings = yield* GatewayConfig
    if (Option.isSome(settings.secretKey) && Redacted.value(settings.secretKey.value).trim() === "") {
      return yield* new ConfigFileError({ message: "environment: GATEWAY_SECRET_KEY is set but empty" })
    }
    const material = Option.isSome(settings.secretKey)
      ? Redacted.value(settings.secretKey.value)
      : yield* keyFileSecret(settings.dataDir)
    return makeSealer(material)
  }),
}) {}
