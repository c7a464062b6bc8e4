/**
 * Entry the plugin's backend resolution imports on first use (`./engines/engineA.js`): builds the
 * engineA backend of `../EngineA.ts` from `{engine: "engineA", ...}`. The vendor client itself
 * is imported only when the backend sends its first request.
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import * as EngineA from "../EngineA.js"
import type { SearchBackendError } from "../Errors.js"
import type { EngineBackend } from "../EngineSupport.js"

/** Makes the engineA backend. */
export const make = (config: EngineA.EngineAConfig): Effect.Effect<EngineBackend, SearchBackendError, Scope.Scope> =>
  Effect.sync(() => EngineA.make(config))
