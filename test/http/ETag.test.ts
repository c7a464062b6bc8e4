/**
 * ETags: the weak tag is `W/"<SHA-1 of the encoded body, hex>"` whichever hash call makes it
 * (Node's one-shot `crypto.hash` where it exists): the same value for text as for its UTF-8 bytes.
 */
import { assert, describe, it } from "@effect/vitest"
import { createHash } from "node:crypto"
import * as ETag from "../../src/http/ETag.js"

const reference = (body: string | Uint8Array) => `W/"${createHash("sha1").update(body).digest("hex")}"`

describe("ETag", () => {
  it("is the weak SHA-1 tag of the body, for text and bytes alike", () => {
    assert.strictEqual(ETag.of('{"id":"42","name":"item 42","price":3}'), 'W/"49d2c1787c296b27221b772a9e1c06a845c98f09"')
    for (const body of ["", "null", '{"name":"crème brûlée № ✓ 😀"}', "x".repeat(100_000)]) {
      assert.strictEqual(ETag.of(body), reference(body))
      assert.strictEqual(ETag.of(new TextEncoder().encode(body)), ETag.of(body))
    }
  })

  it("matches If-None-Match under weak comparison, in a list or as *", () => {
    const tag = ETag.of("{}")
    assert.isTrue(ETag.matches(tag, tag))
    assert.isTrue(ETag.matches(`"other", ${tag.slice(2)}`, tag))
    assert.isTrue(ETag.matches("*", tag))
    assert.isFalse(ETag.matches('W/"other"', tag))
    assert.isFalse(ETag.matches(undefined, tag))
  })
})
