/**
 * A test-only ChangeTap that records what the store hands it: every staged and every published
 * batch, in call order. It can be told to fail its next stage, to check that the store stages
 * inside the transaction.
 */
import type { Scope } from "effect"
import { Context, Effect, Layer, Queue } from "effect"
import * as ChangeTap from "../../../src/kernel/changes/ChangeTap.js"
import { StoreUnavailable } from "../../../src/kernel/Errors.js"

/** One call the store made. */
export interface Call {
  readonly kind: "stage" | "publish"
  readonly changes: ReadonlyArray<ChangeTap.PendingChange>
}

/** The recorder, to inspect from tests. */
export interface Recorder {
  /** Every call so far, oldest first. */
  readonly calls: Array<Call>
  /** Makes the next `stage` fail with `StoreUnavailable`. */
  failNextStage: boolean
  /** Forgets the calls so far (and any pending failure). */
  readonly reset: () => void
  /** The published changes, flattened, since the last reset. */
  readonly published: () => ReadonlyArray<ChangeTap.PendingChange>
}

/** The recorder of the tap in the context. */
export class RecordingTap extends Context.Tag("@fw/framework/test/RecordingTap")<RecordingTap, Recorder>() {}

const makeRecorder = (): Recorder => {
  const recorder: Recorder = {
    calls: [],
    failNextStage: false,
    reset: () => {
      recorder.calls.length = 0
      recorder.failNextStage = false
    },
    published: () => recorder.calls.filter((call) => call.kind === "publish").flatMap((call) => call.changes)
  }
  return recorder
}

/**
 * A recording tap. `scope` is what the store sees: under `local` it may run a one-statement write
 * without a transaction (staging after it), under `fleet` every write stages inside a transaction.
 */
export const layer = (
  options: { readonly scope?: "local" | "fleet" } = {}
): Layer.Layer<ChangeTap.ChangeTap | RecordingTap> => {
  const recorder = makeRecorder()
  const tap: ChangeTap.ChangeTapShape = {
    scope: options.scope ?? "local",
    stage: (changes) =>
      Effect.suspend(() => {
        recorder.calls.push({ kind: "stage", changes: [...changes] })
        if (!recorder.failNextStage) return Effect.void
        recorder.failNextStage = false
        return Effect.fail(new StoreUnavailable({ message: "recording tap: stage refused" }))
      }),
    publish: (changes) => Effect.sync(() => void recorder.calls.push({ kind: "publish", changes: [...changes] })),
    subscribe: (_listener: ChangeTap.Listener): Effect.Effect<void, never, Scope.Scope> => Effect.void,
    addStager: (_stager: ChangeTap.Stager): Effect.Effect<void, never, Scope.Scope> => Effect.void,
    stagers: () => [],
    settled: Effect.void,
    events: Effect.acquireRelease(Queue.unbounded<never>(), Queue.shutdown)
  }
  return Layer.merge(Layer.succeed(ChangeTap.ChangeTap, tap), Layer.succeed(RecordingTap, recorder))
}
