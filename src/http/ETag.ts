/**
 * Conditional GET for `etag: true` routes: every 200 carries a weak `ETag` of the form
 * `W/"<sha-1 of the encoded output>"`; a request whose `If-None-Match` matches it (weak comparison,
 * or `*`) is answered `304 Not Modified` without a body, with the headers a 200 would carry.
 */
import * as Crypto from "node:crypto"

/**
 * The SHA-1 of `body` in hex. Node's one-shot `crypto.hash` (Node 20.12+) makes no `Hash` object:
 * about a quarter of the CPU of `createHash`, and no native-backed object per request for the
 * garbage collector to track (those make every young-generation collection slower). A string is
 * hashed as UTF-8 either way, so the digest is the same.
 */
const sha1Hex: (body: string | Uint8Array) => string = typeof Crypto.hash === "function"
  ? (body) => Crypto.hash("sha1", body, "hex")
  : (body) => Crypto.createHash("sha1").update(body).digest("hex")

/** The weak ETag of an encoded body. */
export const of = (body: string | Uint8Array): string => `W/"${sha1Hex(body)}"`

/** Cache headers of an `etag: true` answer: revalidate every time, per caller (answers are tenant-specific). */
export const cacheHeaders: Readonly<Record<string, string>> = {
  "cache-control": "private, no-cache",
  vary: "Authorization, Cookie"
}

const opaque = (tag: string) => (tag.startsWith("W/") ? tag.slice(2) : tag)

/** True when `ifNoneMatch` (a list of tags, or `*`) matches `etag` under weak comparison. */
export const matches = (ifNoneMatch: string | undefined, etag: string): boolean => {
  if (ifNoneMatch === undefined) return false
  const wanted = opaque(etag)
  for (const candidate of ifNoneMatch.split(",")) {
    const tag = candidate.trim()
    if (tag === "*" || opaque(tag) === wanted) return true
  }
  return false
}
