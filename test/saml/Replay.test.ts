/**
 * Replay protection (spec 3.4, 5.3.3): the AuthnRequest id is consumed by the first response that
 * answers it, an assertion id is accepted once until it expires, and with the store-backed default
 * two app instances sharing PostgreSQL agree. `replayProtection: false` accepts unsolicited
 * responses (and captured ones, within their validity) and warns at boot.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Logger, TestClock } from "effect"
import { SamlReplay } from "../../src/saml/tables.js"
import { samlSsoPlugin } from "../../src/saml/SamlSsoPlugin.js"
import * as Pg from "../support/Pg.js"
import * as Idp from "./support/Idp.js"
import * as Sp from "./support/Sp.js"

const at = Date.UTC(2026, 10, 23, 12)

const reasonOf = (answer: Sp.Browser.Answer) => (answer.status === 302 ? "accepted" : JSON.parse(answer.body).reason as string)

describe("SAML replay protection", () => {
  it.scoped("the same response posted twice: the second is refused (its request was consumed)", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const sp = yield* Sp.serve(Sp.memory)
      const request = yield* Sp.startLogin(sp.served.url)
      const xml = Idp.validResponse({ now: at, inResponseTo: request.id })
      assert.strictEqual(reasonOf(yield* Sp.postToAcs(sp.served.url, xml, request)), "accepted")
      const again = yield* Sp.postToAcs(sp.served.url, xml, request)
      assert.strictEqual(reasonOf(again), "in_response_to")
      assert.isUndefined(Sp.Browser.setCookie(again, "fw:session"))
    }))

  it.scoped("an assertion id seen before is refused even when it answers a new request; forgotten once expired", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const sp = yield* Sp.serve(Sp.memory, { replayProtection: true })
      const post = (now: number) =>
        Effect.flatMap(Sp.startLogin(sp.served.url), (request) =>
          Sp.postToAcs(sp.served.url, Idp.validResponse({ now, inResponseTo: request.id, assertionId: "_same" }), request))
      assert.strictEqual(reasonOf(yield* post(at)), "accepted")
      assert.strictEqual(reasonOf(yield* post(at)), "replay")
      yield* TestClock.adjust("6 minutes")
      assert.strictEqual(reasonOf(yield* post(at + 6 * 60_000)), "accepted")
    }))

  it.scoped("login CSRF: a response carried into a browser that did not start the login is refused, and does not spend the request", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const sp = yield* Sp.serve(Sp.memory)
      const request = yield* Sp.startLogin(sp.served.url)
      assert.match(request.cookie ?? "", /^fw_saml_req_[0-9a-f]{40}=1$/)
      const xml = Idp.validResponse({ now: at, inResponseTo: request.id })
      const elsewhere = yield* Sp.postToAcs(sp.served.url, xml)
      assert.strictEqual(reasonOf(elsewhere), "in_response_to")
      assert.isUndefined(Sp.Browser.setCookie(elsewhere, "fw:session"))
      const home = yield* Sp.postToAcs(sp.served.url, xml, request)
      assert.strictEqual(reasonOf(home), "accepted")
      // The binding cookie is spent with the login.
      assert.match(Sp.Browser.setCookie(home, request.cookie!.split("=")[0]!)!, /Max-Age=0/)
    }))

  it.scoped("the browser binding needs a SameSite=None cookie, so only an https ACS uses it", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const acsUrl = "http://app.example.test/saml/acs"
      const sp = yield* Sp.serve(Sp.memory, { sp: { ...Sp.baseOptions.sp, acsUrl } })
      const request = yield* Sp.startLogin(sp.served.url)
      assert.isUndefined(request.cookie)
      const xml = Idp.signAssertion(Idp.responseXml(
        { now: at, inResponseTo: request.id, destination: acsUrl },
        Idp.assertionXml({ now: at, inResponseTo: request.id, recipient: acsUrl })
      ))
      assert.strictEqual(reasonOf(yield* Sp.postToAcs(sp.served.url, xml)), "accepted")
    }))

  it.scoped("an AuthnRequest expires after the replay TTL", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const sp = yield* Sp.serve(Sp.memory, { replayProtection: { store: true, ttlMs: 60_000 } })
      const request = yield* Sp.startLogin(sp.served.url)
      yield* TestClock.adjust("61 seconds")
      const answer = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now: at + 61_000, inResponseTo: request.id }), request)
      assert.strictEqual(reasonOf(answer), "in_response_to")
    }))

  it.scoped("replayProtection: false accepts an unsolicited response, warns at boot, and needs no store:write", () =>
    Effect.gen(function*() {
      yield* TestClock.setTime(at)
      const plugin = samlSsoPlugin({ ...Sp.baseOptions, replayProtection: false })
      assert.deepStrictEqual(plugin.permissions, [])
      assert.deepStrictEqual(plugin.tables, [])
      assert.deepStrictEqual(samlSsoPlugin(Sp.baseOptions).permissions, ["store:write"])
      assert.deepStrictEqual(samlSsoPlugin(Sp.baseOptions).tables, [SamlReplay])
      assert.deepStrictEqual(samlSsoPlugin({ ...Sp.baseOptions, replayProtection: false, sloStore: { store: true } }).permissions, ["store:write"])
      const logs: Array<string> = []
      const capture = Logger.replace(Logger.defaultLogger, Logger.make(({ message }) => logs.push(String(message))))
      const sp = yield* Sp.serve(Sp.memory, { replayProtection: false }).pipe(Effect.provide(capture))
      assert.isTrue(logs.some((line) => line.includes("replayProtection is off")), logs.join("\n"))
      const answer = yield* Sp.postToAcs(sp.served.url, Idp.validResponse({ now: at, inResponseTo: null }))
      assert.strictEqual(reasonOf(answer), "accepted")
    }))

  if (Pg.serverUrl === null) {
    it("two instances sharing PostgreSQL: skipped", () => console.warn(Pg.skipReason))
  } else {
    it.scoped("two instances sharing PostgreSQL: a response consumed on one is refused on the other", () =>
      Effect.gen(function*() {
        yield* TestClock.setTime(at)
        const url = yield* Pg.freshDatabase
        const one = yield* Sp.serve(Sp.sql(Pg.layerClient(url)))
        const two = yield* Sp.serve(Sp.sql(Pg.layerClient(url)))
        const request = yield* Sp.startLogin(one.served.url)
        const xml = Idp.validResponse({ now: at, inResponseTo: request.id })
        // The request was issued by instance one; instance two accepts its answer (shared store)…
        assert.strictEqual(reasonOf(yield* Sp.postToAcs(two.served.url, xml, request)), "accepted")
        // …and neither accepts it again.
        assert.strictEqual(reasonOf(yield* Sp.postToAcs(one.served.url, xml, request)), "in_response_to")
        const other = yield* Sp.startLogin(two.served.url)
        const replayed = Idp.validResponse({ now: at, inResponseTo: other.id })
        assert.strictEqual(reasonOf(yield* Sp.postToAcs(one.served.url, replayed, other)), "replay")
      }))
  }
})
