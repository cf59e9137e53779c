/** The demo catalog plus models of the given ids (served by the fake provider): tests that store model ids need them in the catalog. */
import { demoCatalog } from "../../src/config/Config.js"
import type { ConfigFile } from "../../src/config/file.js"

export const demoCatalogWith = (ids: ReadonlyArray<string>): ConfigFile => ({
  ...demoCatalog,
  models: [
    ...demoCatalog.models,
    ...ids.map((id): ConfigFile["models"][number] => ({
      id,
      context_length: 100_000,
      endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 1, completion: 1 } }],
    })),
  ],
})
