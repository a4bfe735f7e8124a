import { parseInput, type SwitchboardError } from '@switchboard/core'
import type { Result } from 'neverthrow'
import type { z } from 'zod'

/** Input from outside checked against a schema; failures name every offending field. */
export function validate<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
  what = 'request body',
): Result<z.infer<Schema>, SwitchboardError> {
  return parseInput(schema, input, what)
}
