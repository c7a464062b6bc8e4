/**
 * The fw demo: a two-tenant notes app on an embedded SQLite file. It serves the app, calls it over
 * `POST /rpc` and over a WebSocket as two tenants, shows each sees only its own notes and that a
 * live query updates after a commit, prints what it did, and exits 0.
 */
import { NodeRuntime } from "@effect/platform-node"
import { HttpServer } from "@effect/platform"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Console, Effect, Layer, Queue, Schema, Stream } from "effect"
import { mkdirSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { fileURLToPath } from "node:url"
import * as path from "node:path"
import { issueSession, passwordSessionStrategy } from "../src/auth/index.js"
import { ChangeTap, Client, NodeServer, Server, Store, Subject, defineApp, defineTable, mutation, query, requireScope } from "../src/index.js"

// --- the app -----------------------------------------------------------------------------------

const Notes = defineTable("notes", {
  fields: { tenantId: Schema.String, author: Schema.String, text: Schema.String },
  tenantField: "tenantId"
})

const listNotes = query("notes.list", {
  input: Schema.Struct({}),
  output: Schema.Array(Notes.schema),
  handler: (_, { store }) => store.find(Notes, { orderBy: "text" })
})

const addNote = mutation("notes.add", {
  input: Schema.Struct({ text: Schema.String.pipe(Schema.minLength(1)) }),
  output: Notes.schema,
  guards: [requireScope("notes:write")],
  handler: ({ text }, { store, subject }) => store.insert(Notes, { tenantId: subject.tenantId!, author: subject.id, text })
})

const sessionSecret = "demo-secret-demo-secret-demo-secret-0123456789"

const app = defineApp({
  name: "notes-demo",
  tables: [Notes],
  procedures: [listNotes, addNote],
  auth: [passwordSessionStrategy({ secret: sessionSecret })]
})

// --- running it --------------------------------------------------------------------------------

const dataDir = path.join(path.dirname(fileURLToPath(import.meta.url)), ".data")
rmSync(dataDir, { recursive: true, force: true })
mkdirSync(dataDir, { recursive: true })
const dbFile = path.join(dataDir, "demo.db")

const ServerLive = Server.layer(app, { applySchema: true }).pipe(
  Layer.provide(Store.layerSql),
  Layer.provide(ChangeTap.layerLocal),
  Layer.provide(SqliteClient.layer({ filename: dbFile })),
  Layer.provideMerge(NodeServer.layer(createServer, { port: 0, host: "127.0.0.1" }))
)

const cookieFor = (subject: Subject.Subject) =>
  Effect.map(issueSession(subject, sessionSecret), (value) => ({ cookie: `fw:session=${value}` }))

const program = Effect.gen(function*() {
  const address = (yield* HttpServer.HttpServer).address
  if (address._tag !== "TcpAddress") return yield* Effect.dieMessage("expected a TCP address")
  const base = `127.0.0.1:${address.port}`
  yield* Console.log(`serving "${app.name}" on http://${base} (SQLite file ${path.relative(process.cwd(), dbFile)})`)

  const alice = yield* cookieFor(Subject.make({ type: "user", id: "alice", tenantId: "acme", scopes: ["notes:write"] }))
  const bob = yield* cookieFor(Subject.make({ type: "user", id: "bob", tenantId: "globex", scopes: ["notes:write"] }))

  const http = yield* Client.connect(app.procedures.values(), Client.layerHttp(`http://${base}/rpc`))
  const ws = yield* Client.connect(app.procedures.values(), Client.layerWebSocket(`ws://${base}/rpc`))

  // A live query over the socket, as alice (acme); the first result arrives once it is subscribed.
  const pushes = yield* Queue.unbounded<ReadonlyArray<string>>()
  yield* ws.live(listNotes, {}, { headers: alice }).pipe(
    Stream.runForEach((notes) => Queue.offer(pushes, notes.map((n) => n.text))),
    Effect.forkScoped
  )
  yield* Console.log(`ws    live notes.list as alice@acme  -> ${JSON.stringify(yield* Queue.take(pushes))}`)

  yield* http.call(addNote, { text: "acme: ship the demo" }, { headers: alice })
  yield* Console.log(`POST  notes.add  as alice@acme  "acme: ship the demo"`)
  yield* Console.log(`ws    live push to alice@acme    -> ${JSON.stringify(yield* Queue.take(pushes))}`)

  yield* ws.call(addNote, { text: "globex: secret plans" }, { headers: bob })
  yield* Console.log(`ws    notes.add  as bob@globex  "globex: secret plans" (alice's live query is not told)`)
  yield* ws.call(addNote, { text: "acme: write the docs" }, { headers: alice })
  yield* Console.log(`ws    notes.add  as alice@acme  "acme: write the docs"`)
  const pushed = yield* Queue.take(pushes)
  yield* Console.log(`ws    live push to alice@acme    -> ${JSON.stringify(pushed)}`)

  const acme = (yield* http.call(listNotes, {}, { headers: alice })).map((n) => n.text)
  const globex = (yield* ws.call(listNotes, {}, { headers: bob })).map((n) => n.text)
  yield* Console.log(`POST  notes.list as alice@acme   -> ${JSON.stringify(acme)}`)
  yield* Console.log(`ws    notes.list as bob@globex   -> ${JSON.stringify(globex)}`)

  const anonymous = yield* Effect.either(http.call(addNote, { text: "who am I?" }))
  yield* Console.log(
    `POST  notes.add  anonymously    -> ${anonymous._tag === "Left" ? `refused: ${anonymous.left._tag} ${anonymous.left.message}` : "accepted?!"}`
  )

  const isolated = JSON.stringify(acme) === JSON.stringify(["acme: ship the demo", "acme: write the docs"]) &&
    JSON.stringify(globex) === JSON.stringify(["globex: secret plans"]) &&
    JSON.stringify(pushed) === JSON.stringify(["acme: ship the demo", "acme: write the docs"]) &&
    anonymous._tag === "Left"
  if (!isolated) return yield* Effect.dieMessage("the demo did not behave as expected")
  yield* Console.log("ok: each tenant saw only its own notes, and the live query followed the commits")
})

program.pipe(Effect.scoped, Effect.provide(ServerLive), NodeRuntime.runMain)
