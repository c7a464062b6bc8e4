/** The bearer-token auth strategy of the test apps: tokens name fixed subjects. */
import { Effect } from "effect"
import * as AuthStrategy from "../../src/app/AuthStrategy.js"
import * as Subject from "../../src/kernel/Subject.js"

/**
 * `Authorization: Bearer <token>`: a token of `subjects` authenticates as its subject (looked up
 * on every request, so a test may change the record), any other fails, no header is anonymous.
 */
export const make = (id: string, subjects: Readonly<Record<string, Subject.Subject>>): AuthStrategy.AuthStrategy => ({
  id,
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.sync(() => {
      const token = AuthStrategy.readBearer(headers)
      if (token === undefined) return AuthStrategy.Verdict.NoMatch()
      const subject = subjects[token]
      return subject ? AuthStrategy.Verdict.Authenticated({ subject }) : AuthStrategy.Verdict.Failed({ reason: "unknown token" })
    })
})

/**
 * `Authorization: Bearer <id>@<tenant>`: the token names its own user subject (nothing after the
 * `@`: a subject with no tenant), no header is anonymous.
 */
export const idAtTenant = (id: string): AuthStrategy.AuthStrategy => ({
  id,
  outboundHosts: [],
  authenticate: ({ headers }) =>
    Effect.sync(() => {
      const token = AuthStrategy.readBearer(headers)
      if (token === undefined) return AuthStrategy.Verdict.NoMatch()
      const [user = "", tenant = ""] = token.split("@")
      return AuthStrategy.Verdict.Authenticated({
        subject: Subject.make({ type: "user", id: user, tenantId: tenant === "" ? null : tenant })
      })
    })
})
