/**
 * The check-and-copy of plain schemas (`PlainSchema`, used by `Codec`): on every value it vouches
 * for, it returns what Effect's own parser returns (same keys, same order, same values), in both
 * directions; it vouches for nothing the parser refuses; and schemas that are not plain get none.
 */
import { assert, describe, it } from "@effect/vitest"
import { Arbitrary, Either, FastCheck as fc, Schema } from "effect"
import * as Codec from "../../src/http/Codec.js"
import * as PlainSchema from "../../src/http/PlainSchema.js"

/** Same value, recursively, with keys in the same order (the JSON text would be the same). */
const same = (a: unknown, b: unknown): boolean => {
  if (typeof a !== "object" || a === null || typeof b !== "object" || b === null) return Object.is(a, b)
  if (Array.isArray(a) !== Array.isArray(b)) return false
  const keys = Reflect.ownKeys(a)
  const others = Reflect.ownKeys(b)
  return keys.length === others.length && keys.every((key, i) =>
    key === others[i] && same((a as Record<PropertyKey, unknown>)[key], (b as Record<PropertyKey, unknown>)[key]))
}

const Tag = Schema.Literal("a", "b")
const plain = {
  item: Schema.Struct({ id: Schema.String, name: Schema.String, price: Schema.Number }),
  params: Schema.Struct({ params: Schema.Struct({ id: Schema.String.pipe(Schema.minLength(1)) }) }),
  nested: Schema.Struct({
    id: Schema.String.pipe(Schema.brand("Id")),
    tags: Schema.Array(Schema.Struct({ key: Schema.String, on: Schema.Boolean })),
    count: Schema.Number.pipe(Schema.int(), Schema.between(0, 10)),
    kind: Schema.Literal("note"),
    none: Schema.Null,
    note: Schema.optionalWith(Schema.String, { exact: true })
  }),
  list: Schema.Array(Schema.Struct({ n: Schema.Number })),
  filtered: Schema.Struct({ a: Schema.Number, b: Schema.Number }).pipe(Schema.filter(({ a, b }) => a <= b))
}

/** Replaces the `at`-th leaf of `value` (depth first) with `replacement`, or deletes it (`Symbol.for("delete")`). */
const mutate = (value: unknown, at: number, replacement: unknown): unknown => {
  let seen = 0
  const walk = (node: unknown): unknown => {
    if (typeof node !== "object" || node === null) return seen++ === at ? replacement : node
    if (Array.isArray(node)) return node.map(walk)
    const copy: Record<string, unknown> = {}
    for (const [key, child] of Object.entries(node)) {
      const next = walk(child)
      if (next !== Symbol.for("delete")) copy[key] = next
    }
    return copy
  }
  return walk(value)
}

const replacements = ["", "x", -1, 11, 1.5, NaN, -0, null, undefined, true, [], {}, "note", "a", Symbol.for("delete")]

/** Values around the schemas' shapes: valid ones, valid ones with one leaf changed, and anything at all. */
const around = (schema: Schema.Schema.Any) =>
  fc.oneof(
    Arbitrary.make(schema as Schema.Schema<unknown>),
    fc.tuple(Arbitrary.make(schema as Schema.Schema<unknown>), fc.nat(12), fc.constantFrom(...replacements))
      .map(([value, at, replacement]) => mutate(value, at, replacement)),
    fc.anything(),
    fc.dictionary(fc.constantFrom("id", "name", "price", "params", "tags", "count", "kind", "none", "note", "n", "a", "b", "extra"), fc.oneof(fc.string(), fc.integer(), fc.constant(null), fc.anything()))
  )

describe("PlainSchema", () => {
  for (const [name, schema] of Object.entries(plain)) {
    it(`${name}: what it vouches for is the parser's answer, both ways`, () => {
      const options = { errors: "all", onExcessProperty: "ignore" } as const
      const decodeFit = PlainSchema.compile(schema.ast, options)
      const encodeFit = PlainSchema.compile(schema.ast, undefined)
      assert.isDefined(decodeFit)
      assert.isDefined(encodeFit)
      const decode = Schema.decodeUnknownEither(schema as Schema.Schema<unknown>, options)
      const encode = Schema.encodeUnknownEither(schema as Schema.Schema<unknown>)
      let vouched = 0
      fc.assert(fc.property(around(schema), (input) => {
        for (const [fit, parse] of [[decodeFit!, decode], [encodeFit!, encode]] as const) {
          const fitted = fit(input)
          const parsed = parse(input)
          if (fitted === PlainSchema.Unfit) continue
          vouched++
          if (!Either.isRight(parsed) || !same(fitted, parsed.right)) return false
        }
        return true
      }), { numRuns: 2_000 })
      // Valid values are common among the inputs: the comparison is not empty.
      assert.isAbove(vouched, 200)
    })
  }

  it("schemas that are not plain, and options that change the answer, get no check-and-copy", () => {
    const notPlain = [
      Schema.Struct({ n: Schema.NumberFromString }),
      Schema.Struct({ s: Schema.optional(Schema.String) }),
      Schema.Struct({ s: Schema.NullOr(Schema.String) }),
      Schema.Struct({}),
      Schema.Record({ key: Schema.String, value: Schema.Number }),
      Schema.Tuple(Schema.String, Schema.Number),
      Schema.Struct({ d: Schema.Date }),
      Schema.Struct({ a: Schema.String }).annotations({ parseOptions: { onExcessProperty: "error" } }),
      Tag.pipe(Schema.filter(() => true)).pipe(Schema.compose(Schema.Literal("a", "b")))
    ]
    for (const schema of notPlain) assert.isUndefined(PlainSchema.compile(schema.ast, undefined), String(schema))
    const item = plain.item.ast
    assert.isUndefined(PlainSchema.compile(item, { onExcessProperty: "preserve" }))
    assert.isUndefined(PlainSchema.compile(item, { onExcessProperty: "error" }))
    assert.isUndefined(PlainSchema.compile(item, { exact: true }))
    assert.isUndefined(PlainSchema.compile(item, { propertyOrder: "original" }))
  })

  it("Codec answers through it: undeclared keys dropped, a failure is the parser's own error", () => {
    const decode = Codec.decoder(plain.params)
    const decoded = decode({ query: { q: "x" }, params: { id: "42", extra: 1 } })
    assert.deepStrictEqual(decoded, Either.right({ params: { id: "42" } }))
    const refused = decode({ params: { id: "" } })
    const parser = Schema.decodeUnknownEither(plain.params, { errors: "all", onExcessProperty: "ignore" })({ params: { id: "" } })
    assert.isTrue(Either.isEither(refused) && Either.isLeft(refused) && Either.isLeft(parser))
    assert.strictEqual((refused as Either.Left<{ message: string }, unknown>).left.message, (parser as Either.Left<{ message: string }, unknown>).left.message)
    assert.deepStrictEqual(Codec.encoder(plain.item)({ id: "1", name: "n", price: 3, secret: true }), Either.right({ id: "1", name: "n", price: 3 }))
  })
})
