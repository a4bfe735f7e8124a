import { z } from 'zod'
import { defineTool } from '../../src/index.js'

/**
 * A lookup tool during which an operator acts while the agent works: `whileLooking` sets what runs
 * before the lookup answers (nothing until set).
 */
export function lookupWithOperator() {
  let act: () => Promise<void> = async () => undefined
  const tool = defineTool({
    name: 'slow_lookup',
    description: 'A lookup during which an operator acts on the conversation.',
    parameters: z.object({}),
    execute: async () => {
      await act()
      return 'found'
    },
  })
  return {
    tool,
    whileLooking(action: () => Promise<void>) {
      act = action
    },
  }
}
