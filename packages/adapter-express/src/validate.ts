import { type SwitchboardError, switchboardError } from '@switchboard/core'
import { err, ok, type Result } from 'neverthrow'
import type { z } from 'zod'

export interface FieldProblem {
  readonly path: string
  readonly message: string
}

/** Input from outside checked against a schema; failures name every offending field. */
export function validate<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
  what = 'request body',
): Result<z.infer<Schema>, SwitchboardError> {
  const parsed = schema.safeParse(input)
  if (parsed.success) return ok(parsed.data)
  const details: FieldProblem[] = parsed.error.issues.slice(0, 20).map((issue) => ({
    path: issue.path.map(String).join('.') || '(root)',
    message: issue.message,
  }))
  const fields = [...new Set(details.map((detail) => detail.path))].join(', ')
  return err(switchboardError('VALIDATION_ERROR', `invalid ${what}: ${fields}`, details))
}
