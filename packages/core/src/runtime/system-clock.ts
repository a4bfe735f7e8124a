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
/** Where the two hex digits of each of the 16 bytes go in `xxxxxxxx-xxxx-4xxx-yxxx-xxxxxxxxxxxx`. */
const DIGIT_POSITIONS = [0, 2, 4, 6, 9, 11, 14, 16, 19, 21, 24, 26, 28, 30, 32, 34]
const IDS_PER_REFILL = 256

/**
 * Random (version 4) UUIDs. Not `crypto.randomUUID()`: Node's joins 20 pieces into a string tree
 * of about 850 bytes that every stored id keeps; a turn makes several. Here each id is one flat
 * string of 36 characters, from the same cryptographic source, fetched 256 ids at a time.
 */
export function createRandomIds(): IdGenerator {
  const random = new Uint8Array(16 * IDS_PER_REFILL)
  let offset = random.length
  // The dashes never move: each id overwrites only the digits.
  const characters = Array.from('00000000-0000-0000-0000-000000000000', (character) =>
    character.charCodeAt(0),
  )
  return {
    uuid() {
      if (offset === random.length) {
        globalThis.crypto.getRandomValues(random)
        offset = 0
      }
      for (let index = 0; index < 16; index++) {
        let byte = random[offset + index]!
        if (index === 6)
          byte = (byte & 0x0f) | 0x40 // the version, 4
        else if (index === 8) byte = (byte & 0x3f) | 0x80 // the variant of RFC 9562
        const position = DIGIT_POSITIONS[index]!
        characters[position] = HEX_DIGITS[byte >> 4]!
        characters[position + 1] = HEX_DIGITS[byte & 0x0f]!
      }
      offset += 16
      return String.fromCharCode.apply(null, characters)
    },
  }
}
