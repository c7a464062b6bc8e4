/**
 * Security in the OpenAPI documents: the app's auth strategies become security schemes (each way a
 * credential rides, `AuthStrategy.securitySchemes`), and an operation's guards say whether one is
 * required. An operation behind a guard that admits only a signed-in caller (`requireAuthenticated`,
 * `requireScope`) lists the schemes, any one of which it accepts, with the required scopes as
 * roles; any other operation accepts a caller with or without one (`{}` first: what the caller
 * sees may still depend on who it is, such as its tenant's rows).
 */
import type * as AuthStrategy from "../app/AuthStrategy.js"
import * as Guard from "../app/Guard.js"

/** One OpenAPI security requirement: scheme name → roles (scopes). */
export type Requirement = Record<string, ReadonlyArray<string>>

/** A name usable as a component key (`^[A-Za-z0-9._-]+$`). */
const componentName = (name: string): string => name.replace(/[^A-Za-z0-9._-]/g, "_")

/** The security schemes of `strategies`, by component name (the first strategy keeps a name both use). */
export const schemesOf = (
  strategies: ReadonlyArray<AuthStrategy.AuthStrategy>
): Readonly<Record<string, AuthStrategy.SecurityScheme>> => {
  const out: Record<string, AuthStrategy.SecurityScheme> = {}
  for (const strategy of strategies) {
    for (const [name, scheme] of Object.entries(strategy.securitySchemes ?? {})) {
      const key = componentName(name)
      if (!(key in out)) out[key] = scheme
    }
  }
  return out
}

/** What an operation's guards ask of its caller. */
export interface Security {
  /** The operation's `security`. */
  readonly requirements: ReadonlyArray<Requirement>
  /** Only a signed-in caller passes (401 for an anonymous one or a refused credential). */
  readonly authenticated: boolean
  /** Some guard may refuse (401 or 403 from it). */
  readonly guarded: boolean
}

/**
 * The security of an operation behind `guards` (and `scopes` required besides, as a projection's
 * `publicApi.scopes`), given the app's scheme names.
 */
export const of = (
  guards: ReadonlyArray<Guard.Guard>,
  schemes: ReadonlyArray<string>,
  scopes: ReadonlyArray<string> = []
): Security => {
  const described = guards.map(Guard.requirementOf)
  const authenticated = scopes.length > 0 || described.some((requirement) => requirement?.authenticated === true)
  const roles = [...new Set([...described.flatMap((requirement) => requirement?.scopes ?? []), ...scopes])]
  const alternatives = schemes.map((name): Requirement => ({ [name]: roles }))
  return {
    // With no documented scheme there is nothing to name: every caller is treated alike.
    requirements: schemes.length === 0 ? [] : authenticated ? alternatives : [{}, ...alternatives],
    authenticated,
    guarded: guards.length > 0 || scopes.length > 0
  }
}
