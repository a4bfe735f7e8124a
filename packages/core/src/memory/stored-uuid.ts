const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i

/** Whether `id` is a UUID in any letter case, as a database's uuid column reads it. */
export function isUuid(id: string): boolean {
  return UUID.test(id)
}

/**
 * An id as a database's uuid column holds it: a UUID in lower case, so one given in capitals is
 * the same UUID, stored and found as such. Any other id is kept as given.
 */
export function storedUuid(id: string): string {
  return isUuid(id) ? id.toLowerCase() : id
}
