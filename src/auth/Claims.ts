/**
 * Reading verified JWT claims: claim paths (exact names such as `custom:tenant_id` or
 * `https://example.com/tenant`, and dotted paths into nested objects such as
 * `app_metadata.tenant_id` or `realm_access.tenant`) and the scopes a token grants.
 */
import type * as jose from "jose"

/** Verified JWT claims. */
export type Claims = jose.JWTPayload

/**
 * The claim at `path`: an exact top-level name wins (so names containing dots or colons, like
 * namespaced URLs, work as given), else the path is split on dots and followed into objects.
 */
export const claimAt = (claims: Claims, path: string): unknown => {
  if (Object.hasOwn(claims, path)) return claims[path]
  let current: unknown = claims
  for (const segment of path.split(".")) {
    if (typeof current !== "object" || current === null || !Object.hasOwn(current, segment)) return undefined
    current = (current as Record<string, unknown>)[segment]
  }
  return current
}

/** The claim at `path` when it is a non-empty string, else null. */
export const stringClaim = (claims: Claims, path: string): string | null => {
  const value = claimAt(claims, path)
  return typeof value === "string" && value.length > 0 ? value : null
}

const words = (value: unknown): ReadonlyArray<string> =>
  typeof value === "string"
    ? value.split(" ").filter((word) => word.length > 0)
    : Array.isArray(value)
    ? value.filter((word): word is string => typeof word === "string" && word.length > 0)
    : []

/**
 * The scopes a token grants, becoming `Subject.scopes`: the OAuth `scope` claim (space-separated),
 * `scp` (string or list, as some providers send it) and `permissions` (a list, as providers A, B
 * and D send RBAC permissions), deduplicated in that order; a `*` in them is dropped.
 */
export const scopes = (claims: Claims): ReadonlyArray<string> => {
  const scope = words(claims.scope)
  const scp = words(claims.scp)
  const permissions = words(claims.permissions)
  const all = scp.length === 0 && permissions.length === 0 ? scope : [...new Set([...scope, ...scp, ...permissions])]
  // `*` bypasses every `requireScope`: it is the framework's to grant (inspect, system), not a token's.
  return all.includes("*") ? all.filter((granted) => granted !== "*") : all
}
