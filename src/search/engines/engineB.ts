/**
 * Entry the plugin's backend resolution imports on first use (`./engines/engineB.js`): builds the
 * engineB backend of `../EngineB.ts` from `{engine: "engineB", ...}`. The vendor client itself
 * is imported only when the backend sends its first request.
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import * as EngineB from "../EngineB.js"
import type { SearchBackendError } from "../Errors.js"
import type { EngineBackend } from "../EngineSupport.js"

/** Makes the engineB backend. */
export const make = (config: EngineB.EngineBConfig): Effect.Effect<EngineBackend, SearchBackendError, Scope.Scope> =>
  Effect.sync(() => EngineB.make(config))
