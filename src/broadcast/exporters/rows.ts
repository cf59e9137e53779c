/**
 * One generation as a flat table row, for the kinds that write into a warehouse table
 * (ClickHouse, Snowflake): the columns in one list, with a portable type each kind maps to its
 * own SQL type. Content columns are null in privacy mode (the view has no content then).
 */
import type { GenerationView } from "../exporter.js"

export type ColumnType = "string" | "nullable-string" | "timestamp" | "int" | "nullable-int" | "bool" | "nullable-float"

export type Row = Record<string, string | number | boolean | null>

export const COLUMNS: ReadonlyArray<readonly [name: string, type: ColumnType]> = [
  ["generation_id", "string"],
  ["trace_id", "string"],
  ["span_id", "string"],
  ["parent_span_id", "nullable-string"],
  ["trace_name", "string"],
  ["span_name", "string"],
  ["generation_name", "string"],
  ["start_time", "timestamp"],
  ["end_time", "timestamp"],
  ["duration_ms", "int"],
  ["model", "string"],
  ["upstream_model", "string"],
  ["provider", "string"],
  ["status", "string"],
  ["finish_reason", "nullable-string"],
  ["streamed", "bool"],
  ["input_tokens", "int"],
  ["output_tokens", "int"],
  ["cached_tokens", "int"],
  ["reasoning_tokens", "int"],
  ["total_tokens", "int"],
  ["total_cost", "nullable-float"],
  ["input_cost", "nullable-float"],
  ["output_cost", "nullable-float"],
  ["cached_cost", "nullable-float"],
  ["session_id", "nullable-string"],
  ["user_id", "nullable-string"],
  // `input` is JSON text ([{role, content}]), `metadata` a JSON object as text; `output` is the completion.
  ["input", "nullable-string"],
  ["output", "nullable-string"],
  ["reasoning", "nullable-string"],
  ["metadata", "string"],
  ["error_status", "nullable-int"],
  ["error_message", "nullable-string"],
]

const iso = (ms: number) => new Date(ms).toISOString()

export const rowOf = (g: GenerationView): Row => ({
  generation_id: g.id,
  trace_id: g.traceId,
  span_id: g.spanId,
  parent_span_id: g.parentSpanId ?? null,
  trace_name: g.traceName,
  span_name: g.spanName,
  generation_name: g.generationName,
  start_time: iso(g.startMs),
  end_time: iso(g.endMs),
  duration_ms: Math.max(0, Math.round(g.endMs - g.startMs)),
  model: g.model,
  upstream_model: g.upstreamModel,
  provider: g.provider,
  status: g.status,
  finish_reason: g.finishReason,
  streamed: g.streamed,
  input_tokens: g.inputTokens,
  output_tokens: g.outputTokens,
  cached_tokens: g.cachedTokens,
  reasoning_tokens: g.reasoningTokens,
  total_tokens: g.inputTokens + g.outputTokens,
  total_cost: g.cost?.total ?? null,
  input_cost: g.cost?.input ?? null,
  output_cost: g.cost?.output ?? null,
  cached_cost: g.cost?.cached ?? null,
  session_id: g.sessionId,
  user_id: g.user,
  input: g.input === undefined ? null : JSON.stringify(g.input),
  output: g.output ?? null,
  reasoning: g.reasoning ?? null,
  metadata: JSON.stringify(g.metadata),
  error_status: g.error?.status ?? null,
  error_message: g.error?.message ?? null,
})
