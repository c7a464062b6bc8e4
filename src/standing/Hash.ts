/**
 * MurmurHash3 (x86, 32-bit) over the UTF-8 bytes of a string: the same hash family the flags area
 * buckets with (DESIGN "Flags"), so ids in any script bucket alike in every runtime. Experiments
 * hash with their own salt, so an experiment's arms are independent of any flag's rollout.
 */

const encoder = new TextEncoder()

/** MurmurHash3 x86_32 of the UTF-8 bytes of `text` with `seed`, as an unsigned 32-bit integer. */
export const murmur3 = (text: string, seed = 0): number => {
  const bytes = encoder.encode(text)
  const length = bytes.length
  const blocks = length & ~3
  let h = seed >>> 0
  for (let i = 0; i < blocks; i += 4) {
    let k = bytes[i]! | (bytes[i + 1]! << 8) | (bytes[i + 2]! << 16) | (bytes[i + 3]! << 24)
    k = Math.imul(k, 0xcc9e2d51)
    k = (k << 15) | (k >>> 17)
    k = Math.imul(k, 0x1b873593)
    h ^= k
    h = (h << 13) | (h >>> 19)
    h = (Math.imul(h, 5) + 0xe6546b64) | 0
  }
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
  h ^= length
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

/** A uniform number in [0, 1) from `text`. */
export const unit = (text: string, seed = 0): number => murmur3(text, seed) / 4_294_967_296
