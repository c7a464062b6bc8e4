/**
 * The time of an evaluation: a time, a function reading a clock, or the fiber whose `Clock` to read
 * (a `TestClock` under test). Evaluations read it only when the answer or the usage count needs it.
 */
import type { Fiber, FiberRef } from "effect"
import { Clock, Context, DefaultServices } from "effect"

/** Where an evaluation takes its time from. */
export type TimeSource = number | (() => number) | Fiber.RuntimeFiber<unknown, unknown>

/** The current time of the fiber's `Clock` (a `TestClock` under test), read synchronously. */
const nowOf = (fiber: { getFiberRef<X>(ref: FiberRef.FiberRef<X>): X }) =>
  Context.get(fiber.getFiberRef(DefaultServices.currentServices), Clock.Clock).unsafeCurrentTimeMillis()

/** The time `source` gives now. */
export const timeOf = (source: TimeSource): number =>
  typeof source === "number" ? source : typeof source === "function" ? source() : nowOf(source)
