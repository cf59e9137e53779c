/**
 * Content checks that can block a request (contract rule 7): 403 with the matched patterns in
 * `error.metadata.patterns`, and with metadata enabled a `service_metadata` whose pipeline holds
 * the guardrail stage. Patterns are compiled once at start, each on an engine that searches in
 * time linear in the text (src/domain/pattern-search.ts); a check is plain code over the
 * request's text, run before any spend is reserved.
 */
import { Context, Effect, Layer } from "effect"
import { GatewayConfig } from "../config/Config.js"
import type { GuardrailEntry } from "../config/file.js"
import { Forbidden } from "../domain/errors.js"
import { type PatternSearch, patternSearch } from "../domain/pattern-search.js"
import type { ResponsesRequest } from "../domain/responses.js"
import type { Endpoint } from "./Catalog.js"

interface CompiledGuardrail {
  readonly entry: GuardrailEntry
  readonly patterns: ReadonlyArray<{ readonly source: string; readonly search: PatternSearch }>
  readonly workspaces: ReadonlySet<string> | undefined
}

export interface GuardrailContext {
  readonly request: ResponsesRequest
  readonly workspaceId: string
  readonly requested: string
  readonly strategy: string
  readonly candidates: ReadonlyArray<Endpoint>
  readonly withMetadata: boolean
  /** Asked with the official SDK's header: the metadata goes under `openrouter_metadata` too. */
  readonly metadataAlias?: boolean
}

export interface GuardrailsShape {
  /** The 403 when a guardrail of the workspace matches the request's text, else undefined. */
  readonly blocked: (context: GuardrailContext) => Forbidden | undefined
}

/** The text a guardrail reads: instructions and every text part of the input. */
export const requestText = (request: ResponsesRequest): string => {
  const parts: Array<string> = []
  if (request.instructions != null) parts.push(request.instructions)
  if (typeof request.input === "string") parts.push(request.input)
  else {
    for (const item of request.input ?? []) {
      const content = (item as { content?: unknown }).content
      if (typeof content === "string") parts.push(content)
      else if (Array.isArray(content)) {
        for (const part of content) {
          const text = (part as { text?: unknown }).text
          if (typeof text === "string") parts.push(text)
        }
      }
      const output = (item as { output?: unknown }).output
      if (typeof output === "string") parts.push(output)
    }
  }
  return parts.join("\n")
}

export const makeGuardrails = (entries: ReadonlyArray<GuardrailEntry>): GuardrailsShape => {
  const compiled: ReadonlyArray<CompiledGuardrail> = entries.map((entry) => ({
    entry,
    patterns: entry.patterns.map((source) => ({ source, search: patternSearch(source) })),
    workspaces: entry.workspace_ids === undefined ? undefined : new Set(entry.workspace_ids),
  }))
  if (compiled.length === 0) return { blocked: () => undefined }
  return {
    blocked: (context) => {
      let text: string | undefined
      for (const g of compiled) {
        if (g.workspaces !== undefined && !g.workspaces.has(context.workspaceId)) continue
        text ??= requestText(context.request)
        const matched = g.patterns.filter((p) => p.search.test(text!)).map((p) => p.source)
        if (matched.length === 0) continue
        const summary = `Guardrail "${g.entry.name}" blocked the request: ${matched.length} pattern(s) matched`
        const serviceMetadata = context.withMetadata
          ? {
              requested: context.requested,
              strategy: context.strategy,
              region: null,
              summary,
              attempt: 0,
              is_byok: false,
              endpoints: {
                total: context.candidates.length,
                available: context.candidates.map((e) => ({ model: e.modelId, provider: e.provider.id, selected: false })),
              },
              pipeline: [
                {
                  type: "guardrail",
                  name: g.entry.name,
                  guardrail_id: g.entry.id,
                  guardrail_scope: g.workspaces === undefined ? "global" : "workspace",
                  summary,
                  data: { action: "blocked", detected: true, engines: ["regex"], patterns: matched },
                },
              ],
            }
          : undefined
        return new Forbidden({
          message: `Request blocked: ${summary}`,
          metadata: { patterns: matched },
          ...(serviceMetadata === undefined ? {} : { service_metadata: serviceMetadata }),
          ...(serviceMetadata !== undefined && context.metadataAlias === true ? { openrouter_metadata: serviceMetadata } : {}),
        })
      }
      return undefined
    },
  }
}

export class Guardrails extends Context.Tag("Guardrails")<Guardrails, GuardrailsShape>() {
  static readonly Live = Layer.effect(
    Guardrails,
    Effect.map(GatewayConfig, (config) => makeGuardrails(config.catalog.guardrails ?? [])),
  )
}
