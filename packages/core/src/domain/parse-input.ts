import { err, ok, type Result } from 'neverthrow'
import type { z } from 'zod'
import { type SwitchboardError, switchboardError } from './errors.js'

/** One offending field of an input, as `details` of a `VALIDATION_ERROR` lists it. */
export interface FieldProblem {
  readonly path: string
  readonly message: string
}

/**
 * Input from outside checked against a schema. The edge validates too; core checks again because
 * its services are public API and must not trust a caller that skipped the edge.
 */
export function parseInput<Schema extends z.ZodType>(
  schema: Schema,
  input: unknown,
  what: string,
): Result<z.infer<Schema>, SwitchboardError> {
  const parsed = schema.safeParse(input)
  if (parsed.success) return ok(parsed.data)
  const details: FieldProblem[] = parsed.error.issues.flatMap(problemsOf).slice(0, 20)
  const fields = [...new Set(details.map((detail) => detail.path))].join(', ')
  return err(switchboardError('VALIDATION_ERROR', `invalid ${what}: ${fields}`, details))
}

const pathOf = (path: readonly PropertyKey[]): string => path.map(String).join('.') || '(root)'

/** An unknown key is a problem of that key, not of the object holding it. */
function problemsOf(issue: z.core.$ZodIssue): FieldProblem[] {
  if (issue.code === 'unrecognized_keys') {
    return issue.keys.map((key) => ({ path: pathOf([...issue.path, key]), message: 'unknown field' }))
  }
  return [{ path: pathOf(issue.path), message: issue.message }]
}
