/**
 * A child process of the secret-key race test: waits until the instant given, then creates or
 * reads the key file of the data directory given, and prints the secret (or FAILED and why).
 *   bun test/support/secret-race.ts <dataDir> <epoch ms>
 */
import { Effect, Either } from "effect"
import { keyFileSecret } from "../../src/services/secrets.js"

const [dataDir = "", at = "0"] = process.argv.slice(2)
await Bun.sleep(Math.max(0, Number(at) - Date.now()))
const result = await Effect.runPromise(Effect.either(keyFileSecret(dataDir)))
process.stdout.write(Either.isRight(result) ? result.right : `FAILED ${result.left.message}`)
