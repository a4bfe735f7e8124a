import type { ToolDefinition } from '../ports/llm-provider.js'
import { BUILT_IN_TOOL_NAMES, BUILT_IN_TOOLS } from './built-in-tools.js'
import { type PreparedTool, prepareTool, type Tool } from './tool.js'

export interface ToolRegistry {
  register(tool: Tool): void
  get(name: string): PreparedTool | undefined
  /** Built-ins first, then the app's tools; the same array until the next registration. */
  definitions(): readonly ToolDefinition[]
}

export function createToolRegistry(tools: readonly Tool[] = []): ToolRegistry {
  const appTools = new Map<string, PreparedTool>()
  let definitions: readonly ToolDefinition[] = BUILT_IN_TOOLS.map((tool) => tool.definition)

  const registry: ToolRegistry = {
    register(tool) {
      if (BUILT_IN_TOOL_NAMES.has(tool.name) || appTools.has(tool.name)) {
        throw new TypeError(`a tool named "${tool.name}" is already registered`)
      }
      appTools.set(tool.name, prepareTool(tool))
      definitions = [
        ...BUILT_IN_TOOLS.map((builtIn) => builtIn.definition),
        ...[...appTools.values()].map((t) => t.definition),
      ]
    },
    get: (name) => appTools.get(name),
    definitions: () => definitions,
  }
  for (const tool of tools) registry.register(tool)
  return registry
}
