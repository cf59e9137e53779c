/** The generation record's server-tool fields (migration 16): written, read back, and shown by GET /generation. */
import { describe, expect, test } from "bun:test"
import { generationView } from "../../src/domain/generations.js"
import { fromRow, toRow } from "../../src/store/ledger.js"
import { generationEntry } from "../support/generations.js"

describe("num_search_results, num_fetches, web_search_engine", () => {
  test("a record of a request whose tools searched and fetched shows what they did", () => {
    const entry = generationEntry({ numSearchResults: 12, numFetches: 2, webSearchEngine: "searxng" })
    const view = generationView({ ...fromRow({ ...toRow(entry), has_content: 0 }), hasContent: false })
    expect(view.num_search_results).toBe(12)
    expect(view.num_fetches).toBe(2)
    expect(view.web_search_engine).toBe("searxng")
  })

  test("a record without server tools shows null, as before", () => {
    const view = generationView({ ...fromRow({ ...toRow(generationEntry()), has_content: 0 }), hasContent: false })
    expect(view.num_search_results).toBeNull()
    expect(view.num_fetches).toBeNull()
    expect(view.web_search_engine).toBeNull()
  })
})
