/**
 * The SP side of the SAML tests: an app with `samlSsoPlugin` and the password-session strategy,
 * served over real sockets, and a browser that walks `/saml/login` → IdP → `/saml/acs` and then
 * calls a procedure with the session cookie it was given.
 */
import type { SqlClient } from "@effect/sql"
import { SqliteClient } from "@effect/sql-sqlite-node"
import { Effect, Layer, Schema } from "effect"
import { inflateRawSync } from "node:zlib"
import { defineApp } from "../../../src/app/App.js"
import { query } from "../../../src/app/Procedure.js"
import { passwordSessionStrategy } from "../../../src/auth/Session.js"
import * as ChangeTap from "../../../src/kernel/changes/ChangeTap.js"
import * as Store from "../../../src/kernel/store/Store.js"
import { samlSsoPlugin, type Options } from "../../../src/saml/SamlSsoPlugin.js"
import * as Browser from "../../auth/support/Browser.js"
import * as Serve from "../../support/Serve.js"
import * as Idp from "./Idp.js"

export const sessionSecret = "saml-session-secret-0123456789abcdef"

/** Who the session says the caller is. */
export const whoAmI = query("saml.whoAmI", {
  input: Schema.Struct({}),
  output: Schema.Struct({ type: Schema.String, id: Schema.String, tenantId: Schema.NullOr(Schema.String) }),
  handler: (_, { subject }) => Effect.succeed({ type: subject.type, id: subject.id, tenantId: subject.tenantId })
})

/** The plugin options every test starts from: explicit IdP settings, the IdP's RSA certificate. */
export const baseOptions: Options = {
  idp: { entityId: Idp.idpEntityId, entryPoint: Idp.idpSsoUrl, sloUrl: Idp.idpSloUrl, idpCert: Idp.idpKeys.cert },
  sp: { entityId: Idp.spEntityId, acsUrl: Idp.acsUrl, sloUrl: Idp.sloUrl },
  sessionSecret,
  decryptionPvk: Idp.spKeys.key,
  onLogin: (profile) => ({ type: "user", id: profile.email ?? profile.nameId, tenantId: "acme" })
}

/** An app with the plugin configured by `overrides`. */
export const app = (overrides: Partial<Options> = {}) =>
  defineApp({
    name: "saml-sp",
    procedures: [whoAmI],
    plugins: [samlSsoPlugin({ ...baseOptions, ...overrides })],
    auth: [passwordSessionStrategy({ secret: sessionSecret })]
  })

/** The memory tier. */
export const memory = Store.layerMemory.pipe(Layer.provideMerge(ChangeTap.layerLocal))

/** A SQL tier over `client`. */
export const sql = <E>(client: Layer.Layer<SqlClient.SqlClient, E>) =>
  Store.layerSql.pipe(Layer.provideMerge(ChangeTap.layerLocal), Layer.provideMerge(client))

/** SQLite in memory. */
export const sqlite = () => sql(SqliteClient.layer({ filename: ":memory:" }))

/** Serves an SP app (applying its tables to a SQL store). */
export const serve = <E>(storeLayer: Layer.Layer<Store.Store | ChangeTap.ChangeTap, E>, overrides: Partial<Options> = {}) =>
  Effect.gen(function*() {
    const spApp = app(overrides)
    const served = yield* Serve.serve(spApp, storeLayer, { applySchema: true })
    const client = yield* Serve.httpClient(served, spApp)
    return { served, client, app: spApp }
  })

/** The AuthnRequest a `/saml/login` redirect carries: its ID, RelayState and the raw query. */
export const startLogin = (url: string, returnTo?: string) =>
  Effect.gen(function*() {
    const answer = yield* Browser.get(`${url}/saml/login${returnTo === undefined ? "" : `?returnTo=${encodeURIComponent(returnTo)}`}`)
    if (answer.status !== 302 || answer.location === null) return yield* Effect.dieMessage(`login answered ${answer.status}: ${answer.body}`)
    const location = new URL(answer.location)
    const xml = inflateRawSync(Buffer.from(location.searchParams.get("SAMLRequest")!, "base64")).toString("utf8")
    // The cookie binding the request to this browser (set when the ACS is https).
    const cookie = answer.setCookies.find((line) => line.startsWith("fw_saml_req"))?.split(";")[0]
    return {
      location,
      xml,
      id: /ID="([^"]+)"/.exec(xml)![1]!,
      relayState: location.searchParams.get("RelayState") ?? undefined,
      cookie
    }
  })

/** What the browser that started a login sends back with the IdP's answer. */
export interface Started {
  readonly relayState?: string | undefined
  readonly cookie?: string | undefined
}

/** Posts a response to the ACS as the IdP's auto-submitted form would, from the browser that started the login. */
export const postToAcs = (url: string, xml: string, started: Started = {}) =>
  Effect.promise(async (): Promise<Browser.Answer> => {
    const form = new URLSearchParams({ SAMLResponse: Buffer.from(xml).toString("base64") })
    if (started.relayState !== undefined) form.set("RelayState", started.relayState)
    const response = await fetch(`${url}/saml/acs`, {
      method: "POST",
      body: form,
      redirect: "manual",
      headers: started.cookie === undefined ? {} : { cookie: started.cookie }
    })
    return {
      status: response.status,
      location: response.headers.get("location"),
      setCookies: response.headers.getSetCookie(),
      body: await response.text()
    }
  })

/** Posts a form to `path`. */
export const postForm = (url: string, form: Record<string, string>, cookie?: string, headers: Record<string, string> = {}) =>
  Effect.promise(async (): Promise<Browser.Answer> => {
    const response = await fetch(url, {
      method: "POST",
      body: new URLSearchParams(form),
      redirect: "manual",
      headers: cookie === undefined ? headers : { ...headers, cookie }
    })
    return {
      status: response.status,
      location: response.headers.get("location"),
      setCookies: response.headers.getSetCookie(),
      body: await response.text()
    }
  })

export { Browser }
