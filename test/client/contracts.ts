/**
 * The procedures of the client test app as handler-less contracts: what a browser bundle imports
 * (the server's fixtures attach handlers to the same tags and schemas).
 */
import { Schema } from "effect"

export const Todo = Schema.Struct({ id: Schema.String, text: Schema.String })

export const listTodos = {
  tag: "todos.list",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Array(Todo)
} as const

export const addTodo = {
  tag: "todos.add",
  kind: "mutation",
  input: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)) }),
  output: Todo
} as const

export const whoami = {
  tag: "whoami",
  kind: "query",
  input: Schema.Struct({}),
  output: Schema.Struct({ type: Schema.String, id: Schema.String, tenantId: Schema.NullOr(Schema.String) })
} as const

/** Never answers: a call that is in flight when the connection goes. */
export const hang = {
  tag: "hang",
  kind: "action",
  input: Schema.Struct({}),
  output: Schema.Null
} as const

/**
 * A typed flag as the browser knows it (key, value schema, default): the server declares the same
 * flag with `defineFlag` and its variants (see `hooksApp` in fixtures.ts).
 */
export const Theme = {
  key: "theme",
  schema: Schema.Struct({ accent: Schema.String }),
  default: { accent: "grey" }
} as const
