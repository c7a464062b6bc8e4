/**
 * Deterministic bucketing: murmur3 (x86, 32-bit) over the UTF-8 bytes of `flagKey:unitId`, in
 * 10,000 buckets. The rollout uses seed 0; variants use `variantSeed`, so which units a rollout
 * admits and which variant they get are independent (a 10 % rollout can still reach every variant).
 */

/** Buckets per flag: a rollout of p % admits the buckets below `round(p × 100)`. */
export const buckets = 10_000

/** Seed of the rollout hash. */
export const rolloutSeed = 0

/** Seed of the variant hash (the value Unleash adopted in 2023 for the same reason). */
export const variantSeed = 86028157

const encoder = new TextEncoder()
let scratch = new Uint8Array(256)

/** murmur3 x86 32-bit: mixes the whole 4-byte blocks `bytes[0..end)` into the state `h`. */
const mixBlocks = (h: number, bytes: Uint8Array, end: number): number => {
  for (let i = 0; i < end; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)
    k = Math.imul(k, 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    k = Math.imul(k, 0x1b873593)
    h ^= k
    h = (h << 13) | (h >>> 19)
    h = (Math.imul(h, 5) + 0xe6546b64) | 0
  }
  return h
}

/**
 * murmur3 x86 32-bit, continued: mixes `bytes[0..length)` into the state `h` (the state after
 * whole 4-byte blocks of earlier input), then finishes as if `totalLength` bytes had been hashed.
 */
export const murmur3Continue = (h: number, bytes: Uint8Array, length: number, totalLength: number): number => {
  const blocks = length & ~3
  h = mixBlocks(h, bytes, blocks)
  const tail = length & 3
  if (tail > 0) {
    let k = 0
    if (tail === 3) k ^= bytes[blocks + 2]! << 16
    if (tail >= 2) k ^= bytes[blocks + 1]! << 8
    k ^= bytes[blocks]!
    k = Math.imul(k, 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    k = Math.imul(k, 0x1b873593)
    h ^= k
  }
  h ^= totalLength
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** murmur3 x86 32-bit of `bytes[0..length)`. */
export const murmur3Bytes = (bytes: Uint8Array, length: number, seed: number): number =>
  murmur3Continue(seed >>> 0, bytes, length, length)

/**
 * murmur3 x86 32-bit of `text` read as bytes when every character is ASCII (its UTF-8 bytes are
 * its char codes); undefined as soon as a non-ASCII character shows up.
 */
const murmur3Ascii = (text: string, seed: number): number | undefined => {
  const length = text.length
  let h = seed >>> 0
  const blocks = length & ~3
  let k = 0
  for (let i = 0; i < blocks; i += 4) {
    const a = text.charCodeAt(i)
    const b = text.charCodeAt(i + 1)
    const c = text.charCodeAt(i + 2)
    const d = text.charCodeAt(i + 3)
    if ((a | b | c | d) > 0x7f) return undefined
    k = a | (b << 8) | (c << 16) | (d << 24)
    k = Math.imul(k, 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    k = Math.imul(k, 0x1b873593)
    h ^= k
    h = (h << 13) | (h >>> 19)
    h = (Math.imul(h, 5) + 0xe6546b64) | 0
  }
  const tail = length & 3
  if (tail > 0) {
    k = 0
    for (let i = tail - 1; i >= 0; i--) {
      const code = text.charCodeAt(blocks + i)
      if (code > 0x7f) return undefined
      k ^= code << (8 * i)
    }
    k = Math.imul(k, 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    k = Math.imul(k, 0x1b873593)
    h ^= k
  }
  h ^= length
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** murmur3 x86 32-bit of the UTF-8 bytes of `text` (never UTF-16 code units). */
export const murmur3 = (text: string, seed: number): number => {
  const ascii = murmur3Ascii(text, seed)
  if (ascii !== undefined) return ascii
  // UTF-8 takes at most 3 bytes per UTF-16 code unit.
  if (text.length * 3 > scratch.length) scratch = new Uint8Array(text.length * 3)
  const { written } = encoder.encodeInto(text, scratch)
  return murmur3Bytes(scratch, written, seed)
}

/** The bucket (0 to 9,999) of `unitId` for `flagKey` under `seed`. Ids compare as exact strings. */
export const bucketOf = (flagKey: string, unitId: string, seed: number = rolloutSeed): number =>
  murmur3(`${flagKey}:${unitId}`, seed) % buckets

/** How many buckets a rollout percentage admits: `round(p × 100)`, so float artefacts cannot add one. */
export const threshold = (percentage: number): number => Math.round(percentage * 100)

/**
 * The bucket function of one flag and seed, for the hot path: `bucketer(flagKey, seed)(unitId)`
 * equals `bucketOf(flagKey, unitId, seed)`, but the UTF-8 bytes of `flagKey:` are encoded and
 * their whole 4-byte blocks mixed once, here; a call builds no string and only copies the unit
 * id's bytes (behind the prefix's last 0–3 bytes) into a buffer the bucketer owns.
 */
export const bucketer = (flagKey: string, seed: number): (unitId: string) => number => {
  const prefix = encoder.encode(`${flagKey}:`)
  const whole = prefix.length & ~3
  const rest = prefix.length - whole
  // The murmur3 state after the prefix's whole 4-byte blocks; its last 0–3 bytes, the unit id
  // and the finish are mixed per call.
  const state = mixBlocks(seed >>> 0, prefix, whole)
  let buffer = new Uint8Array(64)
  buffer.set(prefix.subarray(whole))
  return (unitId) => {
    const length = unitId.length
    // UTF-8 takes at most 3 bytes per UTF-16 code unit.
    if (rest + length * 3 > buffer.length) {
      const grown = new Uint8Array(rest + length * 3)
      grown.set(buffer.subarray(0, rest))
      buffer = grown
    }
    let written = length
    for (let i = 0; i < length; i++) {
      const code = unitId.charCodeAt(i)
      if (code > 0x7f) {
        // Not ASCII: the UTF-8 encoder takes the whole id (what was copied is overwritten).
        written = encoder.encodeInto(unitId, buffer.subarray(rest)).written
        break
      }
      buffer[rest + i] = code
    }
    return murmur3Continue(state, buffer, rest + written, whole + rest + written) % buckets
  }
}
