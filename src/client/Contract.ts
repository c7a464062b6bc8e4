/** What the client needs of a procedure, shared with the browser without its handler. */
import type { Schema } from "effect"
import type * as Procedure from "../app/Procedure.js"
/**
 * What the client needs of a procedure: its tag, kind and schemas. A procedure value is one, and
 * so is a handler-less `{tag, kind, input, output}` object shared with the browser (so that
 * handler code, and what it imports, never reaches the bundle).
 */
export interface Contract {
  readonly tag: string
  readonly kind: Procedure.Kind
  readonly input: Schema.Schema.AnyNoContext
  readonly output: Schema.Schema.AnyNoContext
}

/** The input type of a procedure or contract. */
export type Input<P extends Contract> = Schema.Schema.Type<P["input"]>
/** The output type of a procedure or contract. */
export type Output<P extends Contract> = Schema.Schema.Type<P["output"]>
