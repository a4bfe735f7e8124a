import { z } from 'zod'
import type { ToolDefinition } from '../ports/llm-provider.js'

/** What a tool knows about the turn that called it. */
export interface ToolContext {
  readonly companyId: number
  readonly sessionId: string
  readonly agentId: number
  readonly facts: Readonly<Record<string, string>>
}

/** A tool an app registers for its agents. Its result is sent back to the model as text (JSON if not a string). */
export interface Tool<Parameters extends z.ZodType = z.ZodType> {
  readonly name: string
  readonly description: string
  readonly parameters: Parameters
  execute(argumentsValue: z.infer<Parameters>, context: ToolContext): unknown
}

/** A tool with its JSON schema computed once, at registration, not on every model call. */
export interface PreparedTool {
  readonly tool: Tool
  readonly definition: ToolDefinition
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/

export function defineTool<Parameters extends z.ZodType>(tool: Tool<Parameters>): Tool<Parameters> {
  return tool
}

export function prepareTool(tool: Tool): PreparedTool {
  if (!TOOL_NAME.test(tool.name)) {
    throw new TypeError(`tool name "${tool.name}" must be 1 to 64 letters, digits, "_" or "-"`)
  }
  // A zod 3 schema (an app on the other major) would fail deep inside zod's JSON schema writer.
  if (typeof tool.parameters !== 'object' || tool.parameters === null || !('_zod' in tool.parameters)) {
    throw new TypeError(`tool "${tool.name}": parameters must be a zod 4 schema (zod@4), e.g. z.object({…})`)
  }
  const { $schema: _schema, ...parameters } = z.toJSONSchema(tool.parameters) as Record<string, unknown>
  return { tool, definition: { name: tool.name, description: tool.description, parameters } }
}

export type ParsedArguments<T> = { ok: true; value: T } | { ok: false; error: string }

/** Model output is outside input: malformed JSON or wrong shapes become an error for the model. */
export function parseToolArguments<T>(schema: z.ZodType<T>, raw: string): ParsedArguments<T> {
  let json: unknown
  try {
    json = raw.trim() === '' ? {} : JSON.parse(raw)
  } catch {
    return { ok: false, error: 'arguments are not valid JSON' }
  }
  const parsed = schema.safeParse(json)
  if (parsed.success) return { ok: true, value: parsed.data }
  const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
  return { ok: false, error: `invalid arguments: ${issues.join('; ')}` }
}
