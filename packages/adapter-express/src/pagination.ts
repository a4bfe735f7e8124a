import { isCursor } from '@switchboard/core'
import { z } from 'zod'

export const pageQuerySchema = z.object({
  limit: z.coerce.number().int().min(1).max(100).default(50),
  // A cursor this API never handed out is an error, not an empty last page a client would
  // mistake for the end of the list.
  cursor: z.string().min(1).max(500).refine(isCursor, 'not a cursor this API handed out').optional(),
})
