/**
 * ChangeTap: post-commit change events, delivered in commit order to listeners and queues.
 * `layerLocal`: changes are seen by the writing process only. `layerFleet` (PostgreSQL): changes
 * are also written to an outbox and announced with `pg_notify` after commit, so every replica
 * receives every committed change. The in-process delivery lives in Delivery, the fleet scope in
 * FleetTap; this module is the service's tag and its two layers.
 */
import type { SqlClient } from "@effect/sql"
import type { SqlError } from "@effect/sql/SqlError"
import { Context, Effect, Layer } from "effect"
import * as Delivery from "./Delivery.js"
import type { ChangeTapShape } from "./Delivery.js"
import * as FleetTap from "./FleetTap.js"

export type { ChangeTapShape, Listener, PendingChange, Stager } from "./Delivery.js"
export type { FleetOptions, Snapshot } from "./FleetTap.js"
export { finishedIn, fleetChannel, parseSnapshot } from "./FleetTap.js"

/** The change tap service tag. */
export class ChangeTap extends Context.Tag("@fw/framework/ChangeTap")<ChangeTap, ChangeTapShape>() {}

/** The in-process delivery shared by both layers (see Delivery). */
export const makeDelivery = Delivery.make

/** Local change scope: only the writing process sees its changes. */
export const layerLocal: Layer.Layer<ChangeTap> = Layer.effect(
  ChangeTap,
  Effect.map(Delivery.make, (delivery): ChangeTapShape => ({ scope: "local", stage: () => Effect.void, ...delivery }))
)

/**
 * Fleet change scope on PostgreSQL: every replica receives every committed change (see FleetTap).
 * Needs the `SqlClient` of `PgClient.layer` (`@effect/sql-pg`); another SqlClient fails the boot
 * saying so. Its type names only `SqlClient`: `@effect/sql-pg` is an optional peer, and a SQLite
 * app, which does not install it, type-checks these declarations too.
 */
export const layerFleet = (options: FleetTap.FleetOptions = {}): Layer.Layer<ChangeTap, SqlError, SqlClient.SqlClient> =>
  Layer.scoped(ChangeTap, FleetTap.make(options))
