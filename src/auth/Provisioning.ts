/**
 * The default find-or-provision of a local user after a login-only provider login (spec 5.2): the
 * first login creates the organisation and the user, later logins find the user by email. The
 * result is the Subject the app's session is minted for (`tenantId` = the organisation).
 */
import { Effect } from "effect"
import type { StoreError } from "../kernel/Errors.js"
import { Store } from "../kernel/Store.js"
import * as Subject from "../kernel/Subject.js"
import { Organizations, Users } from "./tables.js"

/** Who logged in, as the provider describes them. */
export interface Profile {
  /** The provider's strategy id, e.g. `idp_a`. */
  readonly provider: string
  /** The provider's id of the user. */
  readonly externalId: string
  readonly email: string
  readonly firstName: string | null
  readonly lastName: string | null
  /** The provider's id of the user's organisation, when it has one. */
  readonly organizationId: string | null
}

/**
 * Finds the user by email, else creates them, with their organisation (found again by the
 * provider's organisation id, so colleagues land in one tenant; a user without one gets a fresh
 * organisation). Runs as the system in one transaction: provisioning reads across tenants.
 */
export const findOrProvision = (profile: Profile): Effect.Effect<Subject.Subject, StoreError, Store> =>
  Effect.gen(function*() {
    const store = yield* Store
    const user = yield* store.transaction(Effect.gen(function*() {
      const [existing] = yield* store.find(Users, { where: { email: profile.email }, limit: 1 })
      if (existing !== undefined) return existing
      const [known] = profile.organizationId === null
        ? []
        : yield* store.find(Organizations, {
          where: { provider: profile.provider, externalId: profile.organizationId },
          limit: 1
        })
      const organization = known ?? (yield* store.insert(Organizations, {
        name: profile.email.split("@")[1] ?? profile.email,
        provider: profile.provider,
        externalId: profile.organizationId
      }))
      return yield* store.insert(Users, {
        email: profile.email,
        firstName: profile.firstName,
        lastName: profile.lastName,
        organizationId: organization.id,
        provider: profile.provider,
        externalId: profile.externalId
      })
    }))
    return Subject.make({
      type: "user",
      id: user.id,
      tenantId: user.organizationId,
      metadata: { provider: profile.provider, email: user.email }
    })
  }).pipe(Subject.asSystem)
