/**
 * A check-and-copy for plain schemas on the request path: structs, arrays, strings, numbers,
 * booleans, literals and refinements of them (`minLength`, brands, ...), the shapes most route
 * inputs and outputs have. Their decoding and encoding change nothing but drop undeclared keys, so
 * a value that passes every check decodes (or encodes) to a copy with the declared keys, in the
 * schema's order: exactly what Effect's parser returns, without its per-field results.
 *
 * It answers only the success: a value that fails any check is `Unfit`, and the caller runs the
 * schema's own parser, whose error (and whose answer in any case of doubt) is the one given. Any
 * other shape (a transformation, a union, an optional that admits `undefined`, a class, parse
 * options in an annotation) compiles to `undefined`: no check-and-copy, the parser as always.
 */
import { Option, SchemaAST as AST } from "effect"

/** Returned for a value the check-and-copy does not vouch for: run the schema's parser. */
export const Unfit: unique symbol = Symbol.for("@fw/framework/http/PlainSchema/Unfit")

/** The decoded (or encoded) value, or `Unfit`. */
export type Fit = (input: unknown) => unknown

const hasOwn = Object.prototype.hasOwnProperty

/** The check-and-copy of `ast`, or `undefined` when any part of it is not plain. */
const compileAst = (ast: AST.AST, options: AST.ParseOptions): Fit | undefined => {
  if (Option.isSome(AST.getParseOptionsAnnotation(ast))) return undefined
  switch (ast._tag) {
    case "StringKeyword":
      return (input) => typeof input === "string" ? input : Unfit
    case "NumberKeyword":
      return (input) => typeof input === "number" ? input : Unfit
    case "BooleanKeyword":
      return (input) => typeof input === "boolean" ? input : Unfit
    case "Literal": {
      const literal = ast.literal
      return (input) => input === literal ? input : Unfit
    }
    case "Refinement": {
      const from = compileAst(ast.from, options)
      if (from === undefined) return undefined
      return (input) => {
        const value = from(input)
        return value !== Unfit && Option.isNone(ast.filter(value, options, ast)) ? value : Unfit
      }
    }
    case "TypeLiteral": {
      // `{}` accepts any non-nullish value as is (not a copy): left to the parser.
      if (ast.indexSignatures.length > 0 || ast.propertySignatures.length === 0) return undefined
      const fields: Array<readonly [PropertyKey, boolean, Fit]> = []
      for (const signature of ast.propertySignatures) {
        const fit = compileAst(signature.type, options)
        if (fit === undefined) return undefined
        fields.push([signature.name, signature.isOptional, fit])
      }
      return (input) => {
        if (typeof input !== "object" || input === null || Array.isArray(input)) return Unfit
        const output: Record<PropertyKey, unknown> = {}
        for (let i = 0; i < fields.length; i++) {
          const [name, optional, fit] = fields[i]!
          if (!hasOwn.call(input, name)) {
            if (optional) continue
            return Unfit
          }
          const value = fit((input as Record<PropertyKey, unknown>)[name])
          if (value === Unfit) return Unfit
          output[name] = value
        }
        return output
      }
    }
    case "TupleType": {
      // Arrays (`Schema.Array`): no fixed elements, one rest type.
      if (ast.elements.length > 0 || ast.rest.length !== 1) return undefined
      const fit = compileAst(ast.rest[0]!.type, options)
      if (fit === undefined) return undefined
      return (input) => {
        if (!Array.isArray(input)) return Unfit
        const output: Array<unknown> = new Array(input.length)
        for (let i = 0; i < input.length; i++) {
          const value = fit(input[i])
          if (value === Unfit) return Unfit
          output[i] = value
        }
        return output
      }
    }
    default:
      return undefined
  }
}

/**
 * The check-and-copy of `ast` parsed with `options` (either direction: plain schemas decode and
 * encode alike), or `undefined` when the schema or the options are not plain.
 */
export const compile = (ast: AST.AST, options: AST.ParseOptions | undefined): Fit | undefined => {
  const given = options ?? AST.defaultParseOption
  // Kept or refused undeclared keys, input key order or exact optionals change the answer: the parser's.
  if (given.onExcessProperty === "preserve" || given.onExcessProperty === "error") return undefined
  if (given.propertyOrder === "original" || given.exact === true) return undefined
  return compileAst(ast, given)
}
