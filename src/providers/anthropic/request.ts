/**
 * NormalizedRequest → Anthropic Messages request body: system hoisted out of the messages,
 * strictly alternating roles, tool calls as tool_use/tool_result blocks, thinking budgets, and
 * cache_control breakpoints where the request asks for them, and structured output as
 * `output_config.format`. What Anthropic would refuse is refused here, naming the field.
 */
import { ProviderError, type CacheControl, type ContentPart, type InputItem, type NormalizedRequest, type ReasoningConfig, type ResponseFormat, type ToolChoice } from "../types"
import { ANTHROPIC_REASONING, base64DataUrl, reasoningFits } from "../../domain/responses"

export interface AnthropicCacheControl {
  readonly type: "ephemeral"
  readonly ttl?: "5m" | "1h"
}

type Source =
  | { readonly type: "base64"; readonly media_type: string; readonly data: string }
  | { readonly type: "url"; readonly url: string }
  | { readonly type: "file"; readonly file_id: string }

export type AnthropicBlock =
  | { readonly type: "text"; readonly text: string; cache_control?: AnthropicCacheControl }
  | { readonly type: "image"; readonly source: Source; cache_control?: AnthropicCacheControl }
  | { readonly type: "document"; readonly source: Source; readonly title?: string; cache_control?: AnthropicCacheControl }
  | { readonly type: "tool_use"; readonly id: string; readonly name: string; readonly input: unknown; cache_control?: AnthropicCacheControl }
  | { readonly type: "tool_result"; readonly tool_use_id: string; readonly content: string; cache_control?: AnthropicCacheControl }
  | { readonly type: "thinking"; readonly thinking: string; readonly signature: string }
  | { readonly type: "redacted_thinking"; readonly data: string }

type ThinkingBlock = Extract<AnthropicBlock, { readonly type: "thinking" | "redacted_thinking" }>

const isThinking = (block: AnthropicBlock | AnthropicSystemBlock): block is ThinkingBlock => block.type === "thinking" || block.type === "redacted_thinking"

export interface AnthropicMessage {
  readonly role: "user" | "assistant"
  readonly content: Array<AnthropicBlock>
}

export type AnthropicSystemBlock = { readonly type: "text"; readonly text: string; cache_control?: AnthropicCacheControl }

export interface AnthropicTool {
  readonly name: string
  readonly description?: string
  readonly input_schema: Record<string, unknown>
}

export type AnthropicToolChoice =
  | { readonly type: "auto" | "any" | "none"; readonly disable_parallel_tool_use?: boolean }
  | { readonly type: "tool"; readonly name: string; readonly disable_parallel_tool_use?: boolean }

export interface AnthropicRequestBody {
  readonly model: string
  readonly max_tokens: number
  readonly system?: string | Array<AnthropicSystemBlock>
  readonly messages: Array<AnthropicMessage>
  readonly tools?: Array<AnthropicTool>
  readonly tool_choice?: AnthropicToolChoice
  readonly thinking?: { readonly type: "enabled"; readonly budget_tokens: number }
  readonly temperature?: number
  readonly top_p?: number
  readonly top_k?: number
  readonly metadata?: { readonly user_id: string }
  readonly output_config?: { readonly format: AnthropicOutputFormat }
  readonly stream: boolean
}

/** Anthropic's structured output: a JSON schema only, always enforced (no `name`, no `strict`). */
export interface AnthropicOutputFormat {
  readonly type: "json_schema"
  readonly schema: Record<string, unknown>
}

/** Anthropic requires max_tokens; this is what we ask for when the caller gave no limit. */
export const DEFAULT_MAX_TOKENS = 4096

const EFFORT_BUDGETS: Record<NonNullable<ReasoningConfig["effort"]>, number> = {
  none: 0,
  minimal: 1024,
  low: 1024,
  medium: 4096,
  high: 16384,
  xhigh: 32768,
}

/** The thinking budget the request asks for, or undefined when thinking stays off. */
export const thinkingBudget = (reasoning: ReasoningConfig | undefined): number | undefined => {
  if (reasoning === undefined || reasoning.enabled === false || reasoning.effort === "none") return undefined
  if (reasoning.maxTokens !== undefined) return Math.max(1024, reasoning.maxTokens)
  if (reasoning.effort !== undefined) return EFFORT_BUDGETS[reasoning.effort]
  return reasoning.enabled === true ? EFFORT_BUDGETS.medium : undefined
}

const cacheControlOf = (control: CacheControl): AnthropicCacheControl =>
  control.ttl === undefined ? { type: "ephemeral" } : { type: "ephemeral", ttl: control.ttl }

const sourceOf = (url: string): Source => {
  const inline = base64DataUrl(url)
  return inline === undefined ? { type: "url", url } : { type: "base64", media_type: inline.mediaType, data: inline.data }
}

const blockOf = (part: ContentPart): AnthropicBlock | undefined => {
  let block: AnthropicBlock | undefined
  switch (part.type) {
    case "text":
      // Anthropic refuses empty text blocks.
      block = part.text.length === 0 ? undefined : { type: "text", text: part.text }
      break
    case "image":
      block = { type: "image", source: sourceOf(part.url) }
      break
    case "file": {
      const source: Source | undefined =
        part.fileData !== undefined
          ? base64DataUrl(part.fileData) !== undefined
            ? sourceOf(part.fileData)
            : { type: "base64", media_type: "application/pdf", data: part.fileData }
          : part.fileUrl !== undefined
            ? { type: "url", url: part.fileUrl }
            : part.fileId !== undefined
              ? { type: "file", file_id: part.fileId }
              : undefined
      block = source === undefined ? undefined : { type: "document", source, ...(part.filename === undefined ? {} : { title: part.filename }) }
      break
    }
  }
  if (block !== undefined && part.cacheControl !== undefined) block.cache_control = cacheControlOf(part.cacheControl)
  return block
}

const toolInput = (args: string): unknown => {
  try {
    const parsed: unknown = JSON.parse(args)
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? parsed : {}
  } catch {
    // tool_use.input must be an object; arguments that do not parse cannot be sent as one.
    return {}
  }
}

export interface AnthropicPrompt {
  readonly system: Array<AnthropicSystemBlock>
  readonly messages: Array<AnthropicMessage>
}

/**
 * `thinking`: the request turns thinking on. Earlier thinking then goes back as Anthropic's blocks,
 * with the signature it came with (a client's reasoning item's encrypted content), where Anthropic
 * requires it (an assistant turn with tool use is refused without its thinking); without a
 * signature, or with thinking off, it is left out.
 */
export const anthropicPrompt = (instructions: string | undefined, input: ReadonlyArray<InputItem>, thinking = false): AnthropicPrompt => {
  const system: Array<AnthropicSystemBlock> = []
  const messages: Array<AnthropicMessage> = []
  if (instructions !== undefined && instructions.length > 0) system.push({ type: "text", text: instructions })
  const append = (role: "user" | "assistant", block: AnthropicBlock): void => {
    const last = messages[messages.length - 1]
    if (last === undefined || last.role !== role) {
      messages.push({ role, content: [block] })
    } else if (block.type === "tool_result" || isThinking(block)) {
      // tool_result blocks must open the user turn, and thinking the assistant's, before any text of it.
      let at = 0
      const opens = block.type === "tool_result" ? (open: AnthropicBlock) => open.type === "tool_result" : isThinking
      while (at < last.content.length && opens(last.content[at])) at++
      last.content.splice(at, 0, block)
    } else {
      last.content.push(block)
    }
  }
  for (const item of input) {
    switch (item.type) {
      case "message": {
        if (item.role === "system" || item.role === "developer") {
          for (const part of item.content) {
            if (part.type !== "text" || part.text.length === 0) continue
            system.push(part.cacheControl === undefined ? { type: "text", text: part.text } : { type: "text", text: part.text, cache_control: cacheControlOf(part.cacheControl) })
          }
          break
        }
        for (const part of item.content) {
          const block = blockOf(part)
          if (block !== undefined) append(item.role, block)
        }
        break
      }
      case "function_call":
        append("assistant", { type: "tool_use", id: item.callId, name: item.name, input: toolInput(item.arguments) })
        break
      case "function_call_output":
        append("user", { type: "tool_result", tool_use_id: item.callId, content: item.output })
        break
      case "reasoning":
        if (!thinking || item.encryptedContent === undefined || item.encryptedContent === "" || !reasoningFits(item.format, ANTHROPIC_REASONING)) break
        append(
          "assistant",
          item.redacted === true
            ? { type: "redacted_thinking", data: item.encryptedContent }
            : { type: "thinking", thinking: item.summary, signature: item.encryptedContent },
        )
        break
    }
  }
  return { system, messages }
}

/** Top-level cache_control: one breakpoint on the last cacheable block (last message, else system). */
const placeBreakpoint = (prompt: AnthropicPrompt, control: CacheControl): void => {
  const lastMessage = prompt.messages[prompt.messages.length - 1]
  const block = lastMessage !== undefined ? lastMessage.content[lastMessage.content.length - 1] : prompt.system[prompt.system.length - 1]
  // Anthropic caches thinking only with the blocks around it: a breakpoint cannot sit on one.
  if (block !== undefined && !isThinking(block) && block.cache_control === undefined) block.cache_control = cacheControlOf(control)
}

export const anthropicToolChoice = (choice: ToolChoice | undefined, parallel: boolean | undefined): AnthropicToolChoice | undefined => {
  const noParallel = parallel === false ? { disable_parallel_tool_use: true } : {}
  if (choice === undefined) return parallel === false ? { type: "auto", ...noParallel } : undefined
  if (choice === "none") return { type: "none" }
  if (choice === "auto") return { type: "auto", ...noParallel }
  if (choice === "required") return { type: "any", ...noParallel }
  return { type: "tool", name: choice.name, ...noParallel }
}

/**
 * The `output_config.format` a response format becomes. Anthropic has no JSON mode without a
 * schema: `json_object` is not carried, as a provider's missing parameter is not (ask for
 * `provider.require_parameters` to route only to endpoints that support it).
 */
export const anthropicOutputFormat = (format: ResponseFormat | undefined): AnthropicOutputFormat | undefined =>
  format === undefined || format.type !== "json_schema" ? undefined : { type: "json_schema", schema: format.schema }

export const anthropicRequestBody = (request: NormalizedRequest, stream: boolean): AnthropicRequestBody => {
  const budget = thinkingBudget(request.reasoning)
  const prompt = anthropicPrompt(request.instructions, request.input, budget !== undefined)
  if (request.cacheControl !== undefined) placeBreakpoint(prompt, request.cacheControl)
  let maxTokens = request.maxOutputTokens ?? DEFAULT_MAX_TOKENS
  // max_tokens counts thinking too: keep the caller's answer budget on top of the thinking one.
  if (budget !== undefined && maxTokens <= budget) maxTokens = budget + maxTokens
  const cached = prompt.system.some((block) => block.cache_control !== undefined)
  const system = prompt.system.length === 0 ? undefined : cached ? prompt.system : prompt.system.map((block) => block.text).join("\n\n")
  const hasTools = request.tools.length > 0
  const toolChoice = hasTools ? anthropicToolChoice(request.toolChoice, request.parallelToolCalls) : undefined
  // Anthropic refuses a forced tool while thinking; the gateway's own 400 says which fields clash.
  if (budget !== undefined && (toolChoice?.type === "any" || toolChoice?.type === "tool")) {
    throw new ProviderError(
      "bad_request",
      "tool_choice: anthropic takes only auto or none while reasoning (thinking) is on, not required (any) or a named tool; turn reasoning off or let the model choose",
    )
  }
  const outputFormat = anthropicOutputFormat(request.responseFormat)
  // With thinking on, Anthropic accepts no temperature or top_k, and top_p only from 0.95.
  const sampling =
    budget === undefined
      ? {
          ...(request.temperature === undefined ? {} : { temperature: request.temperature }),
          ...(request.topP === undefined ? {} : { top_p: request.topP }),
          ...(request.topK === undefined ? {} : { top_k: request.topK }),
        }
      : request.topP !== undefined && request.topP >= 0.95
        ? { top_p: request.topP }
        : {}
  return {
    model: request.model,
    max_tokens: maxTokens,
    ...(system === undefined ? {} : { system }),
    messages: prompt.messages,
    ...(hasTools
      ? {
          tools: request.tools.map((tool) => ({
            name: tool.name,
            ...(tool.description === undefined ? {} : { description: tool.description }),
            input_schema: tool.parameters ?? { type: "object", properties: {} },
          })),
        }
      : {}),
    ...(toolChoice === undefined ? {} : { tool_choice: toolChoice }),
    ...(budget === undefined ? {} : { thinking: { type: "enabled" as const, budget_tokens: budget } }),
    ...sampling,
    ...(request.user === undefined ? {} : { metadata: { user_id: request.user } }),
    ...(outputFormat === undefined ? {} : { output_config: { format: outputFormat } }),
    stream,
  }
}
