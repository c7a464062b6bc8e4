import { FetchHttpClient, Headers } from "@effect/platform"
import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as Claims from "../../src/auth/Claims.js"
import * as Subject from "../../src/kernel/Subject.js"

const alice = Subject.make({ type: "user", id: "alice", tenantId: "t1" })
const bob = Subject.make({ type: "user", id: "bob", tenantId: "t2" })
const request = { headers: Headers.empty }

/** A strategy with a fixed verdict that records when it runs. */
const fixed = (calls: Array<string>, id: string, verdict: AuthStrategy.Verdict): AuthStrategy.AuthStrategy => ({
  id,
  outboundHosts: [`${id}.example`],
  authenticate: () => Effect.sync(() => (calls.push(id), verdict))
})

const run = (strategy: AuthStrategy.AuthStrategy) => strategy.authenticate(request).pipe(Effect.provide(FetchHttpClient.layer))

describe("composeAuthStrategies", () => {
  it.effect("tries strategies in order and the first Authenticated wins", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const chain = AuthStrategy.composeAuthStrategies([
        fixed(calls, "a", AuthStrategy.Verdict.NoMatch()),
        fixed(calls, "b", AuthStrategy.Verdict.Authenticated({ subject: alice })),
        fixed(calls, "c", AuthStrategy.Verdict.Authenticated({ subject: bob }))
      ])
      const verdict = yield* run(chain)
      assert.isTrue(verdict._tag === "Authenticated" && verdict.subject.id === "alice")
      assert.deepStrictEqual(calls, ["a", "b"])
    }))

  it.effect("a Failed verdict stops the chain: it never falls through to a later strategy", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const chain = AuthStrategy.composeAuthStrategies([
        fixed(calls, "a", AuthStrategy.Verdict.NoMatch()),
        fixed(calls, "b", AuthStrategy.Verdict.Failed({ reason: "bad token" })),
        fixed(calls, "c", AuthStrategy.Verdict.Authenticated({ subject: bob }))
      ])
      const verdict = yield* run(chain)
      assert.deepStrictEqual(verdict, AuthStrategy.Verdict.Failed({ reason: "bad token" }))
      assert.deepStrictEqual(calls, ["a", "b"])
    }))

  it.effect("no strategy matching is NoMatch; ids and outbound hosts are combined", () =>
    Effect.gen(function*() {
      const calls: Array<string> = []
      const chain = AuthStrategy.composeAuthStrategies([
        fixed(calls, "a", AuthStrategy.Verdict.NoMatch()),
        fixed(calls, "b", AuthStrategy.Verdict.NoMatch()),
        { ...fixed(calls, "c", AuthStrategy.Verdict.NoMatch()), outboundHosts: ["a.example"] }
      ])
      assert.strictEqual((yield* run(chain))._tag, "NoMatch")
      assert.deepStrictEqual(calls, ["a", "b", "c"])
      assert.strictEqual(chain.id, "a|b|c")
      assert.deepStrictEqual(chain.outboundHosts, ["a.example", "b.example"])
    }))
})

describe("token readers", () => {
  it("readBearer takes the Bearer token only", () => {
    assert.strictEqual(AuthStrategy.readBearer(Headers.fromInput({ authorization: "Bearer abc.def" })), "abc.def")
    assert.strictEqual(AuthStrategy.readBearer(Headers.fromInput({ authorization: "bearer  abc " })), "abc")
    assert.isUndefined(AuthStrategy.readBearer(Headers.fromInput({ authorization: "Basic abc" })))
    assert.isUndefined(AuthStrategy.readBearer(Headers.fromInput({ authorization: "Bearer a b" })))
    assert.isUndefined(AuthStrategy.readBearer(Headers.empty))
  })

  it("readCookie finds one cookie among several", () => {
    const headers = Headers.fromInput({ cookie: "a=1; fw:session=v.s; __session=x%3Dy" })
    assert.strictEqual(AuthStrategy.readCookie(headers, "fw:session"), "v.s")
    assert.strictEqual(AuthStrategy.readCookie(headers, "__session"), "x=y")
    assert.isUndefined(AuthStrategy.readCookie(headers, "session"))
    // A quoted value (RFC 6265) is read without its quotes.
    assert.strictEqual(AuthStrategy.readCookie(Headers.fromInput({ cookie: `fw:session="v.s"` }), "fw:session"), "v.s")
  })

  it("token scopes never carry the * that bypasses every scope check", () => {
    assert.deepStrictEqual(Claims.scopes({ scope: "* notes:read" }), ["notes:read"])
    assert.deepStrictEqual(Claims.scopes({ scp: ["*"], permissions: ["a", "*", "b"] }), ["a", "b"])
    assert.deepStrictEqual(Claims.scopes({ scope: "a b" }), ["a", "b"])
  })
})
