/**
 * Conditional GET for `etag: true` routes: every 200 carries a weak `ETag` of the form
 * `W/"<sha-1 of the encoded output>"`; a request whose `If-None-Match` matches it (weak comparison,
 * or `*`) is answered `304 Not Modified` without a body, with the headers a 200 would carry.
 */
import { createHash } from "node:crypto"

/** The weak ETag of an encoded body. */
export const of = (body: string | Uint8Array): string => `W/"${createHash("sha1").update(body).digest("hex")}"`

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
