import type { Clock, IdGenerator } from '../ports/clock.js'

export function createSystemClock(): Clock {
  return {
    now: () => new Date(),
    setTimer(callback, ms) {
      const timer = setTimeout(callback, ms)
      // Timers only wake the runtime; they must never keep a process alive on their own.
      timer.unref?.()
      return () => clearTimeout(timer)
    },
  }
}

const HEX_DIGITS = Array.from('0123456789abcdef', (digit) => digit.charCodeAt(0))
const DASH = '-'.charCodeAt(0)
const IDS_PER_REFILL = 256

/** The character code of the hex digit of `byte`'s high half. */
function high(byte: number): number {
  return HEX_DIGITS[byte >> 4]!
}

/** The character code of the hex digit of `byte`'s low half. */
function low(byte: number): number {
  return HEX_DIGITS[byte & 0x0f]!
}

/**
 * Random (version 4) UUIDs. Not `crypto.randomUUID()`: Node's joins 20 pieces into a string tree
 * of about 850 bytes that every stored id keeps; a turn makes several. Here each id is one flat
 * string of 36 characters, from the same cryptographic source, fetched 256 ids at a time.
 */
export function createRandomIds(): IdGenerator {
  const random = new Uint8Array(16 * IDS_PER_REFILL)
  let offset = random.length
  return {
    uuid() {
      if (offset === random.length) {
        globalThis.crypto.getRandomValues(random)
        offset = 0
      }
      const at = offset
      offset += 16
      const version = (random[at + 6]! & 0x0f) | 0x40 // 4
      const variant = (random[at + 8]! & 0x3f) | 0x80 // RFC 9562's
      // Every character an argument of one call, read straight from the random bytes: `apply` on an
      // array of the characters (and a view of the id's 16 bytes) cost more than the rest of an id.
      // biome-ignore format: the UUID's groups, two bytes a line
      return String.fromCharCode(
        high(random[at + 0]!), low(random[at + 0]!), high(random[at + 1]!), low(random[at + 1]!),
        high(random[at + 2]!), low(random[at + 2]!), high(random[at + 3]!), low(random[at + 3]!),
        DASH,
        high(random[at + 4]!), low(random[at + 4]!), high(random[at + 5]!), low(random[at + 5]!),
        DASH,
        high(version), low(version), high(random[at + 7]!), low(random[at + 7]!),
        DASH,
        high(variant), low(variant), high(random[at + 9]!), low(random[at + 9]!),
        DASH,
        high(random[at + 10]!), low(random[at + 10]!), high(random[at + 11]!), low(random[at + 11]!),
        high(random[at + 12]!), low(random[at + 12]!), high(random[at + 13]!), low(random[at + 13]!),
        high(random[at + 14]!), low(random[at + 14]!), high(random[at + 15]!), low(random[at + 15]!),
      )
    },
  }
}
