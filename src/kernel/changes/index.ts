/**
 * Change delivery: the post-commit events, the change tap with its local and fleet scopes (outbox and
 * LISTEN on PostgreSQL), provenance of a write, and which tables a computation read.
 */
export * as ChangeEvent from "./ChangeEvent.js"
export * as ChangeTap from "./ChangeTap.js"
export * as Delivery from "./Delivery.js"
export * as FleetTap from "./FleetTap.js"
export * as Provenance from "./Provenance.js"
export * as ReadTracking from "./ReadTracking.js"
