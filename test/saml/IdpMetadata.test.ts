/**
 * IdP settings from metadata (spec 2.7): the entry point, every signing certificate and the SLO
 * service come from `idp.metadataUrl` (served here by a loopback server), are re-read every
 * `metadataRefreshMs` (driven by the TestClock), and the explicit settings take over when no
 * metadata can be read.
 */
import { assert, describe, it } from "@effect/vitest"
import { Clock, Effect, TestClock } from "effect"
import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { SamlConfigInvalid } from "../../src/saml/Errors.js"
import * as IdpSource from "../../src/saml/IdpSource.js"
import { certificateBody } from "../../src/saml/Keys.js"
import { samlSsoPlugin } from "../../src/saml/SamlSsoPlugin.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

const at = Date.UTC(2026, 10, 23, 12)

const metadataOf = (certs: ReadonlyArray<string>) =>
  `<?xml version="1.0"?><md:EntityDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata" xmlns:ds="http://www.w3.org/2000/09/xmldsig#" entityID="${Idp.idpEntityId}">` +
  `<md:IDPSSODescriptor protocolSupportEnumeration="urn:oasis:names:tc:SAML:2.0:protocol">` +
  certs.map((cert) => `<md:KeyDescriptor use="signing"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${certificateBody(cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>`).join("") +
  `<md:KeyDescriptor use="encryption"><ds:KeyInfo><ds:X509Data><ds:X509Certificate>${certificateBody(Idp.evilKeys.cert)}</ds:X509Certificate></ds:X509Data></ds:KeyInfo></md:KeyDescriptor>` +
  `<md:SingleLogoutService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.test/meta-slo"/>` +
  `<md:SingleSignOnService Binding="urn:oasis:names:tc:SAML:2.0:bindings:HTTP-Redirect" Location="https://idp.example.test/meta-sso"/>` +
  `</md:IDPSSODescriptor></md:EntityDescriptor>`

/** A loopback metadata server whose document (or failure) the test changes. */
const metadataServer = Effect.acquireRelease(
  Effect.async<{
    readonly url: string
    readonly serve: (body: string | null) => void
    readonly fetches: () => number
    readonly close: () => void
  }>((resume) => {
    let body: string | null = null
    let fetches = 0
    const server = createServer((_, response) => {
      fetches++
      if (body === null) response.writeHead(500).end("down")
      else response.writeHead(200, { "content-type": "application/samlmetadata+xml" }).end(body)
    })
    server.listen(0, "127.0.0.1", () =>
      resume(Effect.succeed({
        url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/metadata`,
        serve: (next) => void (body = next),
        fetches: () => fetches,
        close: () => server.close()
      })))
  }),
  (server) => Effect.sync(server.close)
)

/** Waits (in real time) until the metadata server has answered `count` fetches. */
const fetched = (server: Effect.Effect.Success<typeof metadataServer>, count: number) =>
  Effect.promise(async () => {
    for (let i = 0; i < 1_000 && server.fetches() < count; i++) await new Promise((resolve) => setTimeout(resolve, 10))
  }).pipe(Effect.zipRight(Effect.promise(() => new Promise((resolve) => setTimeout(resolve, 50)))))

let logins = 0

const logIn = (sp: Effect.Effect.Success<ReturnType<typeof Sp.serve>>, keys: Idp.KeyPair, issuer?: string) =>
  Effect.gen(function*() {
    const request = yield* Sp.startLogin(sp.served.url)
    const fields = { now: yield* Clock.currentTimeMillis, inResponseTo: request.id, assertionId: `_login${++logins}`, ...(issuer === undefined ? {} : { issuer }) }
    const xml = Idp.signAssertion(Idp.responseXml(fields, Idp.assertionXml(fields)), { keys })
    const answer = yield* Sp.postToAcs(sp.served.url, xml, request)
    return { request, status: answer.status }
  })

describe("IdP metadata", () => {
  it.scoped("entry point, signing certificates and SLO come from the metadata; a refresh picks up a rotation", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const server = yield* metadataServer
      server.serve(metadataOf([Idp.idpKeys.cert]))
      const idp = { metadataUrl: server.url, metadataRefreshMs: 3_600_000 }
      assert.deepStrictEqual(samlSsoPlugin({ ...Sp.baseOptions, idp }).permissions, ["store:write", `network:outbound:${new URL(server.url).host}`])
      const sp = yield* Sp.serve(Sp.memory, { idp })
      const first = yield* logIn(sp, Idp.idpKeys)
      assert.strictEqual(first.request.location.origin + first.request.location.pathname, "https://idp.example.test/meta-sso")
      assert.strictEqual(first.status, 302)
      assert.strictEqual((yield* logIn(sp, Idp.rotatedIdpKeys)).status, 401)

      // The IdP publishes both keys during the rotation, then only the new one.
      server.serve(metadataOf([Idp.idpKeys.cert, Idp.rotatedIdpKeys.cert]))
      yield* TestClock.adjust("1 hour")
      yield* fetched(server, 2)
      assert.strictEqual((yield* logIn(sp, Idp.rotatedIdpKeys)).status, 302)
      assert.strictEqual((yield* logIn(sp, Idp.idpKeys)).status, 302)
      server.serve(metadataOf([Idp.rotatedIdpKeys.cert]))
      yield* TestClock.adjust("1 hour")
      yield* fetched(server, 3)
      assert.strictEqual((yield* logIn(sp, Idp.idpKeys)).status, 401)

      // A failed refresh keeps the last good metadata.
      server.serve(null)
      yield* TestClock.adjust("1 hour")
      yield* fetched(server, 4)
      assert.strictEqual((yield* logIn(sp, Idp.rotatedIdpKeys)).status, 302)
    }))

  it.scoped("when the metadata cannot be read, the explicit settings are the fallback; without them, 503", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const server = yield* metadataServer
      const withFallback = yield* Sp.serve(Sp.memory, { idp: { ...Sp.baseOptions.idp, metadataUrl: server.url } })
      const login = yield* logIn(withFallback, Idp.idpKeys)
      assert.strictEqual(login.request.location.origin + login.request.location.pathname, Idp.idpSsoUrl)
      assert.strictEqual(login.status, 302)
      const without = yield* Sp.serve(Sp.memory, { idp: { metadataUrl: server.url } })
      const answer = yield* Sp.Browser.get(`${without.served.url}/saml/login`)
      assert.strictEqual(answer.status, 503)
    }))

  it.scoped("an aggregate with several IdPs is refused unless idp.entityId picks one", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const server = yield* metadataServer
      const other = metadataOf([Idp.evilKeys.cert]).replace(`entityID="${Idp.idpEntityId}"`, `entityID="https://other.example.test/idp"`)
      const entity = (xml: string) => xml.replace(/^<\?xml[^>]*\?>/, "")
      server.serve(`<md:EntitiesDescriptor xmlns:md="urn:oasis:names:tc:SAML:2.0:metadata">${entity(other)}${entity(metadataOf([Idp.idpKeys.cert]))}</md:EntitiesDescriptor>`)
      const unnamed = yield* Sp.serve(Sp.memory, { idp: { metadataUrl: server.url } })
      assert.strictEqual((yield* Sp.Browser.get(`${unnamed.served.url}/saml/login`)).status, 503)
      const named = yield* Sp.serve(Sp.memory, { idp: { metadataUrl: server.url, entityId: Idp.idpEntityId } })
      assert.strictEqual((yield* logIn(named, Idp.idpKeys)).status, 302)
      assert.strictEqual((yield* logIn(named, Idp.evilKeys)).status, 401)
    }))

  it.scoped("a configuration written to the spec (metadataUrl, entryPoint/idpCert fallback, no entityId) takes the entity id from the metadata", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const server = yield* metadataServer
      server.serve(metadataOf([Idp.idpKeys.cert]))
      const idp = { metadataUrl: server.url, entryPoint: Idp.idpSsoUrl, idpCert: Idp.idpKeys.cert }
      const sp = yield* Sp.serve(Sp.memory, { idp })
      assert.strictEqual((yield* logIn(sp, Idp.idpKeys)).status, 302)
      // The Issuer is still checked, against the metadata's entityID.
      const foreign = yield* logIn(sp, Idp.idpKeys, "https://other.example.test/idp")
      assert.strictEqual(foreign.status, 401)
      // Its fallback cannot say which Issuer to accept: while the metadata was never read, 503 (and
      // the boot warns), never a login with an unchecked Issuer.
      const down = yield* metadataServer
      const unread = yield* Sp.serve(Sp.memory, { idp: { ...idp, metadataUrl: down.url } })
      assert.strictEqual((yield* Sp.Browser.get(`${unread.served.url}/saml/login`)).status, 503)
      assert.include(IdpSource.unusableFallback({ ...idp, metadataUrl: down.url }) ?? "", "idp.entityId")
      assert.isUndefined(IdpSource.unusableFallback({ ...idp, entityId: Idp.idpEntityId }))
    }))

  it("an explicit configuration without metadata must name idp.entityId, and its refusal says why", () => {
    const { entityId: _, ...withoutEntityId } = Sp.baseOptions.idp
    assert.throws(() => samlSsoPlugin({ ...Sp.baseOptions, idp: withoutEntityId }), SamlConfigInvalid, /idp\.entityId is required only for an explicit configuration without metadata/)
    assert.throws(() => samlSsoPlugin({ ...Sp.baseOptions, idp: { entityId: Idp.idpEntityId, entryPoint: Idp.idpSsoUrl } }), SamlConfigInvalid, /idp\.metadataUrl, or idp\.entryPoint and idp\.idpCert/)
    assert.throws(() => samlSsoPlugin({ ...Sp.baseOptions, idp: { metadataUrl: "metadata.xml" } }), SamlConfigInvalid, /not an absolute URL/)
    assert.doesNotThrow(() => samlSsoPlugin({ ...Sp.baseOptions, idp: { metadataUrl: "https://idp.example.test/metadata" } }))
  })

  it.scoped("metadataRefreshMs: 0 disables the refresh (a sibling with a schedule refreshes on the same clock)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const off = yield* metadataServer
      const on = yield* metadataServer
      off.serve(metadataOf([Idp.idpKeys.cert]))
      on.serve(metadataOf([Idp.idpKeys.cert]))
      const withoutRefresh = yield* Sp.serve(Sp.memory, { idp: { metadataUrl: off.url, metadataRefreshMs: 0 } })
      const withRefresh = yield* Sp.serve(Sp.memory, { idp: { metadataUrl: on.url, metadataRefreshMs: 3_600_000 } })
      assert.strictEqual((yield* logIn(withoutRefresh, Idp.idpKeys)).status, 302)
      assert.strictEqual((yield* logIn(withRefresh, Idp.idpKeys)).status, 302)
      assert.deepStrictEqual([off.fetches(), on.fetches()], [1, 1])
      // The IdP rotates its key: only the refreshing SP sees it.
      off.serve(metadataOf([Idp.rotatedIdpKeys.cert]))
      on.serve(metadataOf([Idp.rotatedIdpKeys.cert]))
      // An hour at a time, each refresh's fetch awaited: the fetch is real I/O, and a refresh
      // schedules its next run only once it is done; advancing three hours at once passed the
      // second and third while the first was still fetching (CI saw 3 fetches instead of 4).
      for (const count of [2, 3, 4]) {
        yield* TestClock.adjust("1 hour")
        yield* fetched(on, count)
      }
      assert.deepStrictEqual([off.fetches(), on.fetches()], [1, 4])
      assert.strictEqual((yield* logIn(withRefresh, Idp.rotatedIdpKeys)).status, 302)
      assert.strictEqual((yield* logIn(withoutRefresh, Idp.rotatedIdpKeys)).status, 401)
      assert.strictEqual(off.fetches(), 1)
    }))
})
