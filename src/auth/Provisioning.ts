/**
 * The default find-or-provision of a local user after a login-only provider login (spec 5.2): the
 * first login creates the organisation and the user, later logins find the user (spec: by email).
 * The result is the Subject the app's session is minted for (`tenantId` = the organisation).
 *
 * Decisions where the spec is silent, each against an account takeover or a split account:
 * - a user is found first by the provider's own id, and by email only when the provider has
 *   verified the address (an unverified address that belongs to an existing account is refused);
 * - addresses are compared with ASCII letters lower-cased and nothing else changed: no trimming,
 *   no Unicode case folding (`"\u212Aevin"`, KELVIN SIGN, would fold to `"kevin"`), no Unicode
 *   normalisation, so two addresses the provider keeps apart stay two users. An address holding a
 *   character no mailbox carries (a space of any kind, U+FEFF and other format characters,
 *   controls, unpaired surrogates) is refused rather than stripped;
 * - row ids derive from the provider's ids, so two first logins at once (another replica, a
 *   double click) meet on one user and one organisation instead of creating two.
 */
import { Effect, Option } from "effect"
import { createHash } from "node:crypto"
import type { StoreError } from "../kernel/Errors.js"
import { Store } from "../kernel/store/Store.js"
import * as Subject from "../kernel/Subject.js"
import { Organizations, Users } from "./tables.js"
import { ProvisioningRefused } from "./Errors.js"

/** Who logged in, as the provider describes them. */
export interface Profile {
  /** The provider's strategy id, e.g. `idp_a`. */
  readonly provider: string
  /** The provider's id of the user. */
  readonly externalId: string
  readonly email: string
  /** Whether the provider verified the address: only a verified address finds an existing account. */
  readonly emailVerified: boolean
  readonly firstName: string | null
  readonly lastName: string | null
  /** The provider's id of the user's organisation, when it has one. */
  readonly organizationId: string | null
}

// White_Space covers U+00A0, U+2000–U+200A, U+2028/9, U+3000…; Cf covers U+FEFF and U+200B–U+200D;
// Cs (with the u flag) matches only unpaired surrogates.
const notInAMailbox = /[\p{White_Space}\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}]/u

/** Whether `email` is one address a mailbox can carry: one `@` between non-empty parts, no character of `notInAMailbox`. */
export const isMailbox = (email: string): boolean => /^[^@]+@[^@]+$/.test(email) && !notInAMailbox.test(email)

/**
 * An address as it is compared and stored: ASCII letters lower-cased, every other character kept
 * (the caller has refused what `isMailbox` refuses). Folding only ASCII means no two distinct
 * non-ASCII addresses can meet.
 */
export const normalizeEmail = (email: string): string => email.replace(/[A-Z]+/g, (letters) => letters.toLowerCase())

const derivedId = (kind: string, ...parts: ReadonlyArray<string>) =>
  `${kind}_${createHash("sha256").update(parts.join("\u0000")).digest("hex").slice(0, 32)}`

/**
 * Finds the user (by the provider's id, else by a verified email), else creates them with their
 * organisation (found again by the provider's organisation id, so colleagues land in one tenant; a
 * user without one gets a fresh organisation). Runs as the system: provisioning reads across tenants.
 */
export const findOrProvision = (profile: Profile): Effect.Effect<Subject.Subject, StoreError | ProvisioningRefused, Store> =>
  Effect.gen(function*() {
    const store = yield* Store
    if (!isMailbox(profile.email)) {
      return yield* new ProvisioningRefused({ reason: "the provider's email address holds characters a mailbox cannot carry" })
    }
    const email = normalizeEmail(profile.email)
    const userId = derivedId("user", profile.provider, profile.externalId)
    /** Inserts the row with this id, or reads the one a concurrent login inserted first. */
    const insertOrGet = <T extends typeof Users | typeof Organizations>(table: T, row: Parameters<typeof store.insert<T>>[1] & { readonly id: string }) =>
      store.insert(table, row).pipe(
        Effect.catchTag("DuplicateRow", (duplicate) =>
          Effect.flatMap(store.get(table, row.id), Option.match({ onNone: () => Effect.fail(duplicate), onSome: Effect.succeed })))
      )
    const user = yield* Option.match(yield* store.get(Users, userId), {
      onSome: Effect.succeed,
      onNone: () =>
        Effect.gen(function*() {
          const [sameEmail] = yield* store.find(Users, { where: { email }, limit: 1 })
          if (sameEmail !== undefined) {
            if (profile.emailVerified) return sameEmail
            return yield* new ProvisioningRefused({
              reason: "this email address belongs to an existing account and the provider has not verified it"
            })
          }
          const organization = yield* insertOrGet(Organizations, {
            id: profile.organizationId === null
              ? derivedId("org", "personal", profile.provider, profile.externalId)
              : derivedId("org", profile.provider, profile.organizationId),
            name: email.split("@")[1] ?? email,
            provider: profile.provider,
            externalId: profile.organizationId
          })
          return yield* insertOrGet(Users, {
            id: userId,
            email,
            firstName: profile.firstName,
            lastName: profile.lastName,
            organizationId: organization.id,
            provider: profile.provider,
            externalId: profile.externalId
          })
        })
    })
    return Subject.make({
      type: "user",
      id: user.id,
      tenantId: user.organizationId,
      metadata: { provider: profile.provider, email: user.email }
    })
  }).pipe(Subject.asSystem)

export { ProvisioningRefused } from "./Errors.js"
