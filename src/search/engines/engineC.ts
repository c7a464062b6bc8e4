/**
 * Entry the plugin's backend resolution imports on first use (`./engines/engineC.js`): builds the
 * engineC backend of `../EngineC.ts` from `{engine: "engineC", ...}`. The vendor client itself
 * is imported only when the backend sends its first request.
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import * as EngineC from "../EngineC.js"
import type { SearchBackendError } from "../Errors.js"
import type { EngineBackend } from "../EngineSupport.js"

/** Makes the engineC backend. */
export const make = (config: EngineC.EngineCConfig): Effect.Effect<EngineBackend, SearchBackendError, Scope.Scope> =>
  Effect.sync(() => EngineC.make(config))
