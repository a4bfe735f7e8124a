import pg from 'pg'

/** A column as PostgreSQL describes it (pg-protocol's RowDescription field). */
interface FieldDescription {
  readonly name: string
  readonly dataTypeID: number
  readonly format: string
}

type ValueParser = (value: unknown) => unknown

interface TypeParsers {
  getTypeParser(oid: number, format?: string): ValueParser
}

/** What an assignment to an ordinary key makes: writable, enumerable, configurable. */
const OWN_PROPERTY = { writable: true, enumerable: true, configurable: true } as const

/** The parts of pg's `Query` that `LeanQuery` reads or sets besides its public ones. */
interface QueryInternals {
  name: string | undefined
  _result: { rows: unknown[]; _types?: TypeParsers }
  _canceledDueToError: unknown
}

/**
 * pg's `Query` for one statement with parameters, its rows built more cheaply. pg describes the
 * columns anew for every execution and, for each, builds a template row as a dictionary object
 * that it then copies into every row (about 9 µs for a dozen columns, then slow property reads
 * downstream), and copies every query's config object first. Here the columns become two arrays
 * and each row a plain object filled in column order, so rows of one statement share one shape.
 * The values are parsed by the same type parsers (the client's, which fall back to pg's), and
 * everything else (preparing, binding, pipelining, errors) is pg's own. Only for statements
 * with parameters: those go by the extended protocol, one statement and one result each.
 */
export class LeanQuery extends pg.Query {
  private names: string[] = []
  private parsers: ValueParser[] = []
  /** A column named `__proto__`: assigned, it would set the row's prototype instead (see below). */
  private protoColumn = false

  constructor(text: string, values: readonly unknown[], name: string | undefined) {
    // Given a string, pg takes the text as it is, without copying a config object.
    super(text, values as unknown[])
    if (name !== undefined) this.internals.name = name
  }

  private get internals(): QueryInternals {
    return this as unknown as QueryInternals
  }

  handleRowDescription(message: { readonly fields: readonly FieldDescription[] }): void {
    const { fields } = message
    const types: TypeParsers = this.internals._result._types ?? pg.types
    const names = new Array<string>(fields.length)
    const parsers = new Array<ValueParser>(fields.length)
    for (let index = 0; index < fields.length; index++) {
      const field = fields[index]!
      names[index] = field.name
      const parse = types.getTypeParser(field.dataTypeID, field.format || 'text')
      parsers[index] = field.format === 'binary' ? (value) => parse(Buffer.from(value as Buffer)) : parse
    }
    this.names = names
    this.parsers = parsers
    this.protoColumn = names.includes('__proto__')
  }

  handleDataRow(message: { readonly fields: readonly unknown[] }): void {
    const internals = this.internals
    if (internals._canceledDueToError) return
    const { names, parsers, protoColumn } = this
    const values = message.fields
    const row: Record<string, unknown> = {}
    try {
      for (let index = 0; index < values.length; index++) {
        const value = values[index]
        const parsed = value === null ? null : parsers[index]!(value)
        // As pg's rows have it: an own property, where `row.__proto__ = parsed` would set the row's
        // prototype to the value (an object such as a jsonb one) or drop it (anything else).
        if (protoColumn) Object.defineProperty(row, names[index]!, { ...OWN_PROPERTY, value: parsed })
        else row[names[index]!] = parsed
      }
    } catch (error) {
      // As pg does: the query fails with this error once the server has finished answering it.
      internals._canceledDueToError = error
      return
    }
    internals._result.rows.push(row)
  }
}
