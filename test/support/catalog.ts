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

/** The demo catalog plus test/penny: every request costs (and holds, whatever its tokens) exactly $0.01. */
export const pennyCatalog: ConfigFile = {
  ...demoCatalog,
  models: [
    ...demoCatalog.models,
    {
      id: "test/penny",
      context_length: 100_000,
      endpoints: [{ provider: "fake", upstream_model: "echo", pricing: { prompt: 0, completion: 0, request: 0.01 } }],
    },
  ],
}
