/**
 * The OpenAPI documents an app serves, checked by an independent linter (Redocly's recommended
 * rules, `@redocly/openapi-core`) and against what the routes really do: the README tour and the
 * notes example as users run them, an app with guarded REST routes, and when the procedures'
 * document is published (development by default, production only when the app opts in).
 */
import { assert, describe, it } from "@effect/vitest"
import { ConfigProvider, Effect, Layer, Option, Schema } from "effect"
import { spawn, type ChildProcess } from "node:child_process"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import * as path from "node:path"
import type { Document as OasDocument } from "openapi-backend"
import { OpenAPIBackend } from "openapi-backend"
import { AppDefinitionError, defineApp } from "../../src/app/App.js"
import type * as App from "../../src/app/App.js"
import * as Guard from "../../src/app/Guard.js"
import { requireAuthenticated, requireScope } from "../../src/app/Guard.js"
import { mutation, query } from "../../src/app/Procedure.js"
import { idpCStrategy } from "../../src/auth/IdentityProviders.js"
import { issueSession, passwordSessionStrategy } from "../../src/auth/Session.js"
import * as OpenApiSecurity from "../../src/http/OpenApiSecurity.js"
import { defineRestRoute } from "../../src/http/RestRoute.js"
import * as ChangeTap from "../../src/kernel/changes/ChangeTap.js"
import { defineTable } from "../../src/kernel/schema/Table.js"
import * as Store from "../../src/kernel/store/Store.js"
import * as Subject from "../../src/kernel/Subject.js"
import { lint } from "../support/OpenApiLint.js"
import * as ReadmeTour from "../support/ReadmeTour.js"
import * as Serve from "../support/Serve.js"
import { jsonBody, send } from "./client.js"

const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))
const root = path.resolve(import.meta.dirname, "../..")

type Json = Record<string, any>

const getJson = async (url: string): Promise<{ status: number; body: Json }> => {
  const response = await fetch(url)
  return { status: response.status, body: await response.json() as Json }
}

const post = async (url: string, body: unknown, headers: Record<string, string> = {}) => {
  const response = await fetch(url, { method: "POST", headers: { "content-type": "application/json", ...headers }, body: JSON.stringify(body) })
  return { status: response.status, body: await response.json() as unknown }
}

/** Checks a call against the document: the status is listed for the operation and the body fits its schema. */
const conforms = async (document: Json) => {
  const backend = new OpenAPIBackend({ definition: structuredClone(document) as OasDocument, quick: true, validate: true, strict: false })
  await backend.init()
  return {
    request: (operationId: string, body: unknown) => {
      const operation = backend.getOperation(operationId)!
      const result = backend.validateRequest(
        { method: operation.method, path: operation.path, headers: { "content-type": "application/json" }, query: {}, body: body as never },
        operation
      )
      return (result.errors ?? []).map((e) => `${e.instancePath} ${e.message}`)
    },
    response: (operationId: string, status: number, body: unknown) => {
      const operation = backend.getOperation(operationId)!
      if (!(String(status) in (operation.responses ?? {}))) return [`status ${status} is not documented for ${operationId}`]
      return (backend.validateResponse(body, operation, status).errors ?? []).map((e) => `${e.instancePath} ${e.message}`)
    }
  }
}

describe("README tour", () => {
  it("serves both documents; Redocly's recommended rules find nothing; the documented shapes are what the routes take and answer", async () => {
    const tour = await ReadmeTour.start()
    try {
      const rest = await getJson(`${tour.url}/openapi.json`)
      const procedures = await getJson(`${tour.url}/rpc/openapi.json`)
      assert.strictEqual(rest.status, 200)
      assert.strictEqual(procedures.status, 200)
      assert.deepStrictEqual(await lint(rest.body, `${tour.url}/openapi.json`), [])
      assert.deepStrictEqual(await lint(procedures.body, `${tour.url}/rpc/openapi.json`), [])

      const document = procedures.body
      assert.sameMembers(Object.keys(document["paths"]), ["/rpc/users.signup", "/rpc/users.login", "/rpc/notes.list", "/rpc/notes.add"])
      const add = document["paths"]["/rpc/notes.add"]["post"]
      assert.deepStrictEqual(add["security"], [{ "password-session": [] }])
      assert.deepStrictEqual(add["tags"], ["notes"])
      assert.strictEqual(add["summary"], "mutation notes.add")
      assert.deepStrictEqual(document["components"]["securitySchemes"]["password-session"], {
        type: "apiKey",
        in: "cookie",
        name: "fw:session",
        description: "The signed session issued at login, as the `fw:session` cookie."
      })
      // Signing up needs no credential, but one may be sent.
      assert.deepStrictEqual(document["paths"]["/rpc/users.signup"]["post"]["security"], [{}, { "password-session": [] }])
      assert.deepStrictEqual(document["info"]["license"], { name: "Proprietary", identifier: "LicenseRef-Proprietary" })
      assert.deepStrictEqual(document["servers"], [{ url: "/" }])

      const check = await conforms(document)
      const credentials = { email: "ada@example.com", password: "correct horse" }
      assert.deepStrictEqual(check.request("users.signup", credentials), [])
      assert.isNotEmpty(check.request("users.signup", { email: "ada@example.com" }), "a body without the password is refused by the document")

      const anonymous = await post(`${tour.url}/rpc/notes.add`, { text: "hello" })
      assert.strictEqual(anonymous.status, 401)
      assert.deepStrictEqual(check.response("notes.add", anonymous.status, anonymous.body), [])

      const short = await post(`${tour.url}/rpc/users.signup`, { email: "ada@example.com", password: "short" })
      assert.strictEqual(short.status, 400)
      assert.deepStrictEqual(check.response("users.signup", short.status, short.body), [])

      const signup = await post(`${tour.url}/rpc/users.signup`, credentials)
      assert.strictEqual(signup.status, 200)
      assert.deepStrictEqual(check.response("users.signup", signup.status, signup.body), [])
      const again = await post(`${tour.url}/rpc/users.signup`, credentials)
      assert.strictEqual(again.status, 409)
      assert.deepStrictEqual(check.response("users.signup", again.status, again.body), [])

      const login = await post(`${tour.url}/rpc/users.login`, credentials)
      assert.deepStrictEqual(check.response("users.login", login.status, login.body), [])
      const cookie = { cookie: `fw:session=${(login.body as { session: string }).session}` }
      const added = await post(`${tour.url}/rpc/notes.add`, { text: "hello" }, cookie)
      assert.strictEqual(added.status, 200)
      assert.deepStrictEqual(check.response("notes.add", added.status, added.body), [])
      const listed = await post(`${tour.url}/rpc/notes.list`, {}, cookie)
      assert.strictEqual(listed.status, 200)
      assert.deepStrictEqual(check.response("notes.list", listed.status, listed.body), [])

      const wrongType = await post(`${tour.url}/rpc/notes.add`, { text: 42 }, cookie)
      assert.strictEqual(wrongType.status, 400)
      assert.isNotEmpty(check.request("notes.add", { text: 42 }))
      assert.deepStrictEqual(check.response("notes.add", wrongType.status, wrongType.body), [])

      const page = await fetch(`${tour.url}/docs`)
      assert.strictEqual(page.status, 200)
      assert.include(await page.text(), "/rpc/notes.add")
    } finally {
      tour.stop()
    }
  }, 120_000)
})

/** Starts the notes example as `npm run example:notes` does, on a fresh SQLite file. */
const startNotes = async (): Promise<{ url: string; stop: () => void }> => {
  const port = await ReadmeTour.freePort()
  const dir = mkdtempSync(path.join(tmpdir(), "fw-notes-openapi-"))
  const child: ChildProcess = spawn(
    process.execPath,
    [path.join(root, "node_modules/tsx/dist/cli.mjs"), "--tsconfig", "examples/notes/tsconfig.json", "examples/notes/server.ts"],
    { cwd: root, env: { ...process.env, PORT: String(port), NOTES_DB: path.join(dir, "notes.db") }, stdio: ["ignore", "pipe", "pipe"] }
  )
  const stop = () => {
    child.kill("SIGTERM")
    rmSync(dir, { recursive: true, force: true })
  }
  await new Promise<void>((resolve, reject) => {
    let output = ""
    const onData = (chunk: Buffer) => {
      output += chunk.toString()
      if (output.includes("notes: serving on")) resolve()
    }
    child.stdout!.on("data", onData)
    child.stderr!.on("data", onData)
    child.on("exit", (code) => reject(new Error(`the example exited (${code}) before listening:\n${output}`)))
  }).catch((error) => {
    stop()
    throw error
  })
  return { url: `http://127.0.0.1:${port}`, stop }
}

describe("notes example", () => {
  it("serves both documents, with its plugins' procedures; Redocly's recommended rules find nothing", async () => {
    const notes = await startNotes()
    try {
      const rest = await getJson(`${notes.url}/openapi.json`)
      const procedures = await getJson(`${notes.url}/rpc/openapi.json`)
      assert.deepStrictEqual(await lint(rest.body, `${notes.url}/openapi.json`), [])
      assert.deepStrictEqual(await lint(procedures.body, `${notes.url}/rpc/openapi.json`), [])
      const paths = Object.keys(procedures.body["paths"])
      assert.includeMembers(paths, ["/rpc/notes.list", "/rpc/notes.add", "/rpc/notes.delete", "/rpc/search.query"])
      assert.deepStrictEqual(procedures.body["paths"]["/rpc/notes.add"]["post"]["security"], [{ "password-session": ["notes:write"] }])
      // A plugin's typed errors are documented on its procedures.
      assert.include(JSON.stringify(procedures.body["paths"]["/rpc/search.query"]["post"]["responses"]), "#/components/schemas/SearchIndexNotFound")
    } finally {
      notes.stop()
    }
  }, 120_000)
})

const Notes = defineTable("openapi_notes", { fields: { tenantId: Schema.String, text: Schema.String }, tenantField: "tenantId" })
const secret = "openapi-test-session-secret-of-32-bytes"

const guardedApp = (openApi?: App.OpenApiOptions) =>
  defineApp({
    name: "guarded",
    tables: [Notes],
    auth: [passwordSessionStrategy({ secret })],
    restRoutes: [
      defineRestRoute({
        method: "GET",
        path: "/notes/:id",
        version: "v2",
        input: Schema.Struct({ params: Schema.Struct({ id: Schema.String }) }),
        output: Notes.schema,
        guards: [requireScope("notes:read")],
        handler: ({ params }, { store }) =>
          store.get(Notes, params.id).pipe(Effect.flatMap(Option.match({
            onNone: () => Effect.fail({ status: 404, message: "no such note" }),
            onSome: Effect.succeed
          })))
      }),
      defineRestRoute({ method: "GET", path: "/status", output: Schema.Struct({ ok: Schema.Boolean }), handler: () => Effect.succeed({ ok: true }) })
    ],
    procedures: [
      query("notes.count", {
        input: Schema.Struct({}),
        output: Schema.Number,
        guards: [requireAuthenticated],
        publicApi: { scopes: ["notes:read"] },
        handler: (_, { store }) => store.count(Notes)
      }),
      // An app's own guard, described: documented like `requireScope("staff")`.
      mutation("admin.purge", {
        input: Schema.Struct({}),
        output: Schema.Struct({}),
        guards: [Guard.describe((ctx) => ctx.subject.scopes.includes("staff") ? undefined : { status: 403, message: "staff only" }, {
          authenticated: true,
          scopes: ["staff"]
        })],
        handler: () => Effect.succeed({})
      }),
      // Not described: it may admit anyone, so the credential stays optional, but its refusal is listed.
      query("notes.peek", {
        input: Schema.Struct({}),
        output: Schema.Number,
        guards: [(ctx) => ctx.headers["x-peek"] === "yes" ? undefined : { status: 403, message: "no peeking" }],
        handler: () => Effect.succeed(1)
      }),
      mutation("notes.add", {
        input: Schema.Struct({ text: Schema.String }),
        output: Notes.schema,
        summary: "Add a note",
        guards: [requireScope("notes:write")],
        handler: ({ text }, { store, subject }) => store.insert(Notes, { tenantId: subject.tenantId!, text })
      })
    ],
    ...(openApi === undefined ? {} : { openApi })
  })

const withEnv = (env: Record<string, string>) => Effect.withConfigProvider(ConfigProvider.fromMap(new Map(Object.entries(env))))

describe("guarded routes", () => {
  it.scopedLive("a scope-guarded REST route names its security and 401/403, and an anonymous caller gets a documented status", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(guardedApp({ license: { name: "MIT", identifier: "MIT" }, servers: [{ url: "https://api.example.org/" }] }), memory)
      const rest = (yield* send(`${url}/openapi.json`)).json() as Json
      assert.deepStrictEqual(yield* Effect.promise(() => lint(rest, `${url}/openapi.json`)), [])
      const get = rest["paths"]["/v2/notes/{id}"]["get"]
      assert.deepStrictEqual(get["security"], [{ "password-session": ["notes:read"] }])
      assert.includeMembers(Object.keys(get["responses"]), ["401", "403"])
      assert.strictEqual(get["summary"], "GET /v2/notes/:id")
      // An unguarded route takes a caller with or without a session.
      assert.deepStrictEqual(rest["paths"]["/status"]["get"]["security"], [{}, { "password-session": [] }])
      // A projection's `publicApi.scopes` are its roles, with its guards'.
      assert.deepStrictEqual(rest["paths"]["/v1/notes/count"]["get"]["security"], [{ "password-session": ["notes:read"] }])
      assert.deepStrictEqual(rest["info"]["license"], { name: "MIT", identifier: "MIT" })
      assert.deepStrictEqual(rest["servers"], [{ url: "https://api.example.org" }])

      const check = yield* Effect.promise(() => conforms(rest))
      const anonymous = yield* send(`${url}/v2/notes/n1`)
      assert.strictEqual(anonymous.status, 403)
      assert.deepStrictEqual(check.response("get_v2_notes_by_id", anonymous.status, anonymous.json()), [])

      const procedures = (yield* send(`${url}/rpc/openapi.json`)).json() as Json
      assert.deepStrictEqual(yield* Effect.promise(() => lint(procedures, `${url}/rpc/openapi.json`)), [])
      const add = procedures["paths"]["/rpc/notes.add"]["post"]
      assert.strictEqual(add["summary"], "Add a note")
      assert.deepStrictEqual(add["security"], [{ "password-session": ["notes:write"] }])
      assert.deepStrictEqual(procedures["paths"]["/rpc/admin.purge"]["post"]["security"], [{ "password-session": ["staff"] }])
      const peek = procedures["paths"]["/rpc/notes.peek"]["post"]
      assert.deepStrictEqual(peek["security"], [{}, { "password-session": [] }])
      assert.include(JSON.stringify(peek["responses"]["403"]), "#/components/schemas/GuardRefused")
      assert.notInclude(JSON.stringify(peek["responses"]["401"]), "#/components/schemas/GuardRefused")
      const session = yield* issueSession(Subject.make({ type: "user", id: "ada", tenantId: "acme", scopes: ["notes:read"] }), secret)
      const refused = yield* send(`${url}/rpc/notes.add`, jsonBody("POST", { text: "x" }, { cookie: `fw:session=${session}` }))
      assert.strictEqual(refused.status, 403)
      const checkProcedures = yield* Effect.promise(() => conforms(procedures))
      assert.deepStrictEqual(checkProcedures.response("notes.add", refused.status, refused.json()), [])
      const oversized = yield* send(`${url}/rpc/notes.add`, { method: "POST", headers: { "content-type": "text/plain" }, body: "x" })
      assert.strictEqual(oversized.status, 415)
      assert.deepStrictEqual(checkProcedures.response("notes.add", oversized.status, oversized.json()), [])
    }))
})

describe("security schemes", () => {
  it("a JWT strategy is a bearer token, and a cookie where it reads one", () => {
    assert.deepStrictEqual(OpenApiSecurity.schemesOf([idpCStrategy({ frontendApi: "https://clerk.example.org" })]), {
      idp_c: {
        type: "http",
        scheme: "bearer",
        bearerFormat: "JWT",
        description: "A JWT accepted by the `idp_c` strategy, as `Authorization: Bearer <token>`."
      },
      "idp_c-cookie": { type: "apiKey", in: "cookie", name: "__session", description: "The same JWT as the `__session` cookie." }
    })
    assert.deepStrictEqual(Object.keys(OpenApiSecurity.schemesOf([idpCStrategy({ frontendApi: "https://clerk.example.org", cookieName: null })])), ["idp_c"])
  })
})

describe("where the procedures' document is served", () => {
  it.scopedLive("in development by default: /rpc/openapi.json, and /docs renders the procedures beside the REST routes", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(guardedApp(), memory).pipe(withEnv({ NODE_ENV: "development" }))
      assert.strictEqual((yield* send(`${url}/rpc/openapi.json`)).status, 200)
      const page = (yield* send(`${url}/docs`)).text
      assert.include(page, "/rpc/notes.add")
      assert.include(page, "/v2/notes/{id}")
      // The projection's operation id is taken by the REST document: the page tells them apart.
      assert.include(page, "rpc.notes.count")
    }))

  it.scopedLive("not in production unless the app opts in: 404, and /docs shows the REST routes only", () =>
    Effect.gen(function*() {
      const { url } = yield* Serve.serve(guardedApp(), memory).pipe(withEnv({ NODE_ENV: "production" }))
      const refused = yield* send(`${url}/rpc/openapi.json`)
      assert.strictEqual(refused.status, 404)
      assert.strictEqual((yield* send(`${url}/openapi.json`)).status, 200)
      const page = (yield* send(`${url}/docs`)).text
      assert.notInclude(page, "/rpc/notes.add")
      assert.include(page, "/v2/notes/{id}")
    }))

  it.scopedLive("in production with openApi.procedures \"always\"; never with \"never\"", () =>
    Effect.gen(function*() {
      const always = yield* Serve.serve(guardedApp({ procedures: "always" }), memory).pipe(withEnv({ NODE_ENV: "production" }))
      assert.strictEqual((yield* send(`${always.url}/rpc/openapi.json`)).status, 200)
      const never = yield* Serve.serve(guardedApp({ procedures: "never" }), memory).pipe(withEnv({ NODE_ENV: "development" }))
      assert.strictEqual((yield* send(`${never.url}/rpc/openapi.json`)).status, 404)
      assert.notInclude((yield* send(`${never.url}/docs`)).text, "/rpc/notes.add")
    }))

  it.scopedLive("Server.layer's production option decides over NODE_ENV", () =>
    Effect.gen(function*() {
      const production = yield* Serve.serve(guardedApp(), memory, { production: true }).pipe(withEnv({ NODE_ENV: "development" }))
      assert.strictEqual((yield* send(`${production.url}/rpc/openapi.json`)).status, 404)
      const development = yield* Serve.serve(guardedApp(), memory, { production: false }).pipe(withEnv({ NODE_ENV: "production" }))
      assert.strictEqual((yield* send(`${development.url}/rpc/openapi.json`)).status, 200)
    }))

  it.scopedLive("a procedure whose schema has no JSON Schema form is documented as any JSON; the others as usual", () =>
    Effect.gen(function*() {
      const Instant = Schema.declare((input: unknown): input is Date => input instanceof Date)
      const app = defineApp({
        procedures: [
          query("clock.now", { input: Schema.Struct({}), output: Instant, handler: () => Effect.succeed(new Date(0)) }),
          query("clock.zone", { input: Schema.Struct({}), output: Schema.String, handler: () => Effect.succeed("UTC") })
        ]
      })
      const { url } = yield* Serve.serve(app, memory).pipe(withEnv({ NODE_ENV: "development" }))
      const document = (yield* send(`${url}/rpc/openapi.json`)).json() as Json
      const now = document["paths"]["/rpc/clock.now"]["post"]["responses"]["200"]["content"]["application/json"]["schema"]
      assert.strictEqual(now["description"], "The procedure's output (its schema has no JSON Schema form).")
      assert.notProperty(now, "type")
      assert.deepStrictEqual(document["paths"]["/rpc/clock.zone"]["post"]["responses"]["200"]["content"]["application/json"]["schema"], { type: "string" })
      assert.deepStrictEqual(yield* Effect.promise(() => lint(document, `${url}/rpc/openapi.json`)), [])
    }))

  it("refuses an openApi option it cannot publish", () => {
    assert.throws(() => guardedApp({ license: { name: "Mine" } as App.License }), AppDefinitionError, /openApi.license/)
    assert.throws(() => guardedApp({ procedures: "sometimes" as "always" }), AppDefinitionError, /openApi.procedures/)
    assert.throws(() => guardedApp({ servers: [] }), AppDefinitionError, /openApi.servers/)
  })
})
