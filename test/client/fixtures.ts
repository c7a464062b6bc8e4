/**
 * A small two-tenant todo app for the client tests. Callers authenticate with
 * `Authorization: Bearer <token>`; `tokens` is mutable so a test can rotate a token.
 */
import { Effect, Layer, Schema } from "effect"
import { WebSocket } from "ws"
import { defineApp } from "../../src/app/App.js"
import { requireAuthenticated, requireScope } from "../../src/app/Guard.js"
import { action, mutation, query } from "../../src/app/Procedure.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import type { AreaErrorClass, SocketConstructor } from "../../src/client/index.js"
import { mount } from "../../src/client/index.js"
import { defineFlag, flagsPlugin } from "../../src/flags/index.js"
import { type SearchPlugin, searchPlugin } from "../../src/search/SearchPlugin.js"
import { Notes, notesIndex } from "../search/support.js"
import { addTodo, hang, listTodos, Theme, whoami } from "./contracts.js"
import * as TokenStrategy from "../support/TokenStrategy.js"

export const Todos = defineTable("client_todos", {
  fields: { tenantId: Schema.String, text: Schema.String },
  tenantField: "tenantId"
})

/** Token → subject. */
export const tokens: Record<string, Subject.Subject> = {
  "tok-alice": Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["todos:write"] }),
  "tok-alice-2": Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["todos:write"] }),
  // Rotated (and the first revoked) by the browser restart test, and used by nothing else.
  "tok-rotate": Subject.make({ type: "user", id: "rita", tenantId: "rotation", scopes: ["todos:write"] }),
  "tok-rotate-2": Subject.make({ type: "user", id: "rita", tenantId: "rotation", scopes: ["todos:write"] }),
  "tok-bob": Subject.make({ type: "user", id: "bob", tenantId: "globex", scopes: ["todos:write"] }),
  "tok-carol": Subject.make({ type: "user", id: "carol", tenantId: "acme", scopes: [] })
}

const tokenStrategy = TokenStrategy.make("client-test-token", tokens)

const list = query(listTodos.tag, {
  input: listTodos.input,
  output: listTodos.output,
  guards: [requireAuthenticated],
  handler: (_, { store }) =>
    Effect.map(store.find(Todos, { orderBy: "text" }), (rows) => rows.map((row) => ({ id: row.id, text: row.text })))
})

const add = mutation(addTodo.tag, {
  input: addTodo.input,
  output: addTodo.output,
  guards: [requireScope("todos:write")],
  handler: ({ text }, { store, subject }) =>
    Effect.map(store.insert(Todos, { tenantId: subject.tenantId ?? "", text }), (row) => ({ id: row.id, text: row.text }))
})

const me = query(whoami.tag, {
  input: whoami.input,
  output: whoami.output,
  handler: (_, { subject }) => Effect.succeed({ type: subject.type, id: subject.id, tenantId: subject.tenantId })
})

const hangs = action(hang.tag, { input: hang.input, output: hang.output, handler: () => Effect.never })

/** What the test app is made of, for tests that define a variant of it. */
export const parts = { tables: [Todos], procedures: [list, add, me, hangs], auth: [tokenStrategy] }

export const app = defineApp({ name: "client-test", ...parts })

export const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** The `theme` typed flag: on for tenant acme, whose callers are served the `blue` variant. */
export const ThemeFlag = defineFlag({
  key: Theme.key,
  value: Theme.schema,
  default: Theme.default,
  targeting: [{ tenantIds: ["acme"] }],
  offVariant: "plain",
  variants: [{ name: "blue", value: { accent: "blue" } }, { name: "plain", value: { accent: "grey" }, weight: 0 }]
})

/**
 * The client test app with the flags plugin (`beta` off, `stable` on, the typed `theme`) and the
 * search plugin over the `notes` table (memory backend, tenant-scoped).
 */
export const hooksApp = (flagOptions: { readonly store?: "memory" | "sql" } = {}) => {
  const flags = flagsPlugin({ ...flagOptions, flags: { beta: false, stable: true }, typedFlags: [ThemeFlag] })
  const search = searchPlugin({ backend: "memory", indexes: { notes: notesIndex }, replicaId: "client-hooks" })
  const app = defineApp({
    name: "client-hooks",
    tables: [...parts.tables, Notes],
    procedures: parts.procedures,
    auth: parts.auth,
    plugins: [flags, search]
  })
  searched = search
  return { app, flags }
}

/** The search plugin of the last `hooksApp` (its index catches up after the tap settles). */
let searched: SearchPlugin | undefined

/** The notes `hooksApp` tests search: three of tenant acme, one of globex. */
export const seedNotes = Effect.gen(function*() {
  const notes = yield* Store.Store
  yield* notes.insert(Notes, { tenantId: "acme", title: "milk", body: "buy milk", n: 1 })
  yield* notes.insert(Notes, { tenantId: "acme", title: "milk run", body: "oat milk", n: 2 })
  yield* notes.insert(Notes, { tenantId: "acme", title: "bread", body: "rye", n: 2 })
  yield* notes.insert(Notes, { tenantId: "globex", title: "milk", body: "globex milk", n: 1 })
  yield* Effect.flatMap(ChangeTap.ChangeTap, (tap) => tap.settled)
  if (searched !== undefined) yield* searched.settled
})

/** Mounts the api at `url` as alice (tenant acme) or `token`, over `ws`, disposed with the scope. */
export const mountAs = <const Errors extends ReadonlyArray<AreaErrorClass> = readonly []>(
  url: string,
  options: { readonly token?: string; readonly errors?: Errors } = {}
) =>
  Effect.acquireRelease(
    Effect.sync(() =>
      mount<"main", Errors>({
        apis: { main: { url, authHeaders: async () => ({ authorization: `Bearer ${options.token ?? "tok-alice"}` }) } },
        WebSocket: WebSocket as unknown as SocketConstructor,
        ...(options.errors === undefined ? {} : { errors: options.errors })
      })
    ),
    (fw) => Effect.sync(fw.dispose)
  )

/** Toggles `flag` through the flags plugin's inspect route of the app at `url`; resolves with the status. */
export const toggleFlag = (url: string, flag: string, inspectToken: string) =>
  Effect.promise(() =>
    fetch(`${url}/_fw/inspect/plugins/flags/toggle`, {
      method: "POST",
      headers: { authorization: `Bearer ${inspectToken}`, "content-type": "application/json" },
      body: JSON.stringify({ flag, actor: "ops" })
    }).then((response) => response.status)
  )
