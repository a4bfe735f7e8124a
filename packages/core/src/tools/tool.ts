import { z } from 'zod'
import type { ToolDefinition } from '../ports/llm-provider.js'

/** What a tool knows about the turn that called it. */
export interface ToolContext {
  readonly companyId: number
  readonly sessionId: string
  readonly agentId: number
  readonly facts: Readonly<Record<string, string>>
}

/**
 * A zod 4 schema made by any copy of zod 4: the app's own `zod` (whatever 4.x it installed), or
 * `zod/v4` of zod 3.25. Core reads it with its own zod, so the type asks only for the shape every
 * zod 4 schema has, not for core's copy of zod.
 */
export interface ToolParameters {
  readonly _zod: { readonly output: unknown }
}

/** A tool an app registers for its agents. Its result is sent back to the model as text (JSON if not a string). */
export interface Tool<Parameters extends ToolParameters = ToolParameters> {
  readonly name: string
  readonly description: string
  /** A zod 4 schema of the arguments, e.g. `z.object({ orderNumber: z.string() })`. */
  readonly parameters: Parameters
  execute(argumentsValue: z.output<Parameters>, context: ToolContext): unknown
}

/** A tool with its JSON schema computed once, at registration, not on every model call. */
export interface PreparedTool {
  readonly tool: Tool
  readonly definition: ToolDefinition
}

const TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/

export function defineTool<Parameters extends ToolParameters>(tool: Tool<Parameters>): Tool<Parameters> {
  return tool
}

export function prepareTool(tool: Tool): PreparedTool {
  if (!TOOL_NAME.test(tool.name)) {
    throw new TypeError(`tool name "${tool.name}" must be 1 to 64 letters, digits, "_" or "-"`)
  }
  // A zod 3 schema (an app on the other major) would fail deep inside zod's JSON schema writer.
  if (typeof tool.parameters !== 'object' || tool.parameters === null || !('_zod' in tool.parameters)) {
    throw new TypeError(
      `tool "${tool.name}": parameters must be a zod 4 schema, e.g. z.object({…}) with \`import { z } from 'zod'\` of zod 4 (with zod 3.25, from 'zod/v4')`,
    )
  }
  const { $schema: _schema, ...parameters } = z.toJSONSchema(zodSchema(tool.parameters)) as Record<
    string,
    unknown
  >
  return { tool, definition: { name: tool.name, description: tool.description, parameters } }
}

export type ParsedArguments<T> = { ok: true; value: T } | { ok: false; error: string }

/** A schema of any copy of zod 4, as core's zod reads it (the parts every zod 4 shares). */
function zodSchema<Parameters extends ToolParameters>(
  schema: Parameters,
): z.core.$ZodType<z.output<Parameters>> {
  return schema as unknown as z.core.$ZodType<z.output<Parameters>>
}

/**
 * Model output is outside input: malformed JSON or wrong shapes become an error for the model.
 * Parsed with core's zod, so an app's schema of another zod 4 copy needs no method of its own.
 */
export function parseToolArguments<Parameters extends ToolParameters>(
  schema: Parameters,
  raw: string,
): ParsedArguments<z.output<Parameters>> {
  let json: unknown
  try {
    json = raw.trim() === '' ? {} : JSON.parse(raw)
  } catch {
    return { ok: false, error: 'arguments are not valid JSON' }
  }
  const parsed = z.safeParse(zodSchema(schema), json)
  if (parsed.success) return { ok: true, value: parsed.data }
  const issues = parsed.error.issues.map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
  return { ok: false, error: `invalid arguments: ${issues.join('; ')}` }
}
