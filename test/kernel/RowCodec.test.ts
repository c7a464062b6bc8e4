/**
 * Rows of a table whose fields are plain (strings, numbers, booleans, literals, unions of them) are
 * encoded and decoded by a checked copy instead of the schema parser. The copy must answer exactly
 * as the parser does: the same values, the same key order (JSON bodies and ETags depend on it), the
 * same refusals.
 */
import { assert, describe, it } from "@effect/vitest"
import { Either, Schema } from "effect"
import * as RowCodec from "../../src/kernel/schema/RowCodec.js"
import { defineTable } from "../../src/kernel/schema/Table.js"

const fields = {
  title: Schema.String,
  price: Schema.Number,
  done: Schema.Boolean,
  kind: Schema.Literal("a", "b"),
  note: Schema.optional(Schema.String),
  owner: Schema.NullOr(Schema.String),
  tag: Schema.optional(Schema.NullOr(Schema.String))
}
const Plain = defineTable("codec_plain", { fields })
/** The same fields behind refinements that accept everything: the parser decides every row. */
const always = <S extends Schema.Schema.AnyNoContext>(schema: S) => schema.pipe(Schema.filter(() => true))
const Parsed = defineTable("codec_parsed", {
  fields: {
    title: always(Schema.String),
    price: always(Schema.Number),
    done: always(Schema.Boolean),
    kind: always(Schema.Literal("a", "b")),
    note: Schema.optional(always(Schema.String)),
    owner: always(Schema.NullOr(Schema.String)),
    tag: Schema.optional(always(Schema.NullOr(Schema.String)))
  }
})

const full = { id: "r1", title: "t", price: 1.5, done: true, kind: "a", note: "n", owner: null, tag: "x" }
const rows: ReadonlyArray<Record<string, unknown>> = [
  full,
  { kind: "b", owner: "ada", id: "r2", done: false, price: -0, title: "" },
  { ...full, note: undefined, tag: null },
  { ...full, extra: 1 },
  { ...full, price: "1.5" },
  { ...full, kind: "c" },
  { ...full, title: undefined },
  { id: "r3" },
  { ...full, [Symbol.for("x")]: 1 },
  { ...full, price: Number.NaN },
  { ...full, title: "nul\u0000" }
]

const json = (either: Either.Either<unknown, { readonly message: string }>) =>
  Either.isRight(either) ? JSON.stringify(either.right) : `refused: ${either.left.message.replace("codec_parsed", "codec_plain")}`

describe("RowCodec: plain tables take a checked copy", () => {
  it("decodes exactly as the schema parser: values, key order, refusals", () => {
    const decodeParsed = Schema.decodeUnknownEither(Plain.schema, { errors: "all", onExcessProperty: "ignore" })
    for (const row of rows) {
      const fast = RowCodec.of(Plain).decode(row)
      const parsed = decodeParsed(row)
      assert.strictEqual(Either.isRight(fast), Either.isRight(parsed), JSON.stringify(row))
      if (Either.isRight(fast) && Either.isRight(parsed)) {
        assert.strictEqual(JSON.stringify(fast.right), JSON.stringify(parsed.right))
        assert.deepStrictEqual(Object.keys(fast.right as object), Object.keys(parsed.right as object))
      }
    }
  })

  it("encodes exactly as through the parser: values, key order, refusals and their messages", () => {
    for (const row of rows) {
      assert.strictEqual(json(RowCodec.of(Plain).encode(row)), json(RowCodec.of(Parsed).encode(row)), JSON.stringify(row))
    }
  })

  it("hands out a copy: changing a decoded row leaves the stored one alone", () => {
    const stored = { ...full }
    const decoded = Either.getOrThrow(RowCodec.of(Plain).decode(stored)) as Record<string, unknown>
    decoded.title = "changed"
    assert.strictEqual(stored.title, "t")
  })
})

describe("RowCodec: values no tier can store", () => {
  const Docs = defineTable("codec_docs", { fields: { body: Schema.Unknown } })
  const refusal = (body: unknown) => {
    const encoded = RowCodec.of(Docs).encode({ id: "d", body })
    return Either.isLeft(encoded) ? encoded.left.message : undefined
  }

  it("refuses a cycle and a problem nested anywhere, accepts the same object met twice", () => {
    const cyclic: Record<string, unknown> = { a: 1 }
    cyclic.self = { inner: [cyclic] }
    assert.strictEqual(refusal(cyclic), "body: a value refers to itself")
    const shared = { x: 1 }
    assert.isUndefined(refusal({ one: shared, two: [shared, shared] }))
    assert.strictEqual(refusal({ deep: [{ n: Number.POSITIVE_INFINITY }] }), "body: numbers must be finite")
    assert.strictEqual(refusal(["ok", { t: "nul\u0000" }]), "body: text must not contain NUL or unpaired surrogates")
    assert.strictEqual(refusal(1n), "body: bigint values cannot be stored")
    assert.isUndefined(refusal({ fine: ["a", 1, true, null] }))
  })
})
