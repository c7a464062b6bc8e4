/**
 * Running strategies in tests and asserting their verdicts.
 */
import { FetchHttpClient, Headers } from "@effect/platform"
import { assert } from "@effect/vitest"
import { Effect } from "effect"
import type * as AuthStrategy from "../../../src/app/AuthStrategy.js"

/** Runs `strategy` on a request with `headers`, over a fetch HttpClient. */
export const authenticate = (strategy: AuthStrategy.AuthStrategy, headers: Record<string, string>) =>
  strategy.authenticate({ headers: Headers.fromInput(headers) }).pipe(Effect.provide(FetchHttpClient.layer))

/** The Authorization header carrying `token`. */
export const bearer = (token: string) => ({ authorization: `Bearer ${token}` })

/** Asserts an Authenticated verdict with this tenant and provider, and returns its subject. */
export const expectSubject = (verdict: AuthStrategy.Verdict, tenantId: string, provider: string) => {
  if (verdict._tag !== "Authenticated") {
    return assert.fail(`expected Authenticated, got ${verdict._tag}${verdict._tag === "Failed" ? `: ${verdict.reason}` : ""}`)
  }
  assert.strictEqual(verdict.subject.tenantId, tenantId)
  assert.strictEqual(verdict.subject.metadata.provider, provider)
  return verdict.subject
}

/** Asserts a Failed verdict whose reason contains `because`. */
export const expectFailed = (verdict: AuthStrategy.Verdict, because: string) => {
  if (verdict._tag !== "Failed") return assert.fail(`expected Failed (${because}), got ${verdict._tag}`)
  assert.include(verdict.reason, because)
}
