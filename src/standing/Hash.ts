/**
 * MurmurHash3 (x86, 32-bit) over the UTF-8 bytes of a string: the flags area's bucketing hash
 * (DESIGN "Flags"), so ids in any script bucket alike in every runtime. Experiments hash with
 * their own salt, so an experiment's arms are independent of any flag's rollout.
 */
import { Bucket } from "../flags/index.js"

/** MurmurHash3 x86_32 of the UTF-8 bytes of `text` with `seed`, as an unsigned 32-bit integer. */
export const murmur3 = (text: string, seed = 0): number => Bucket.murmur3(text, seed)

/** A uniform number in [0, 1) from `text`. */
export const unit = (text: string, seed = 0): number => murmur3(text, seed) / 4_294_967_296
