/**
 * A synchronous read of the fiber that runs it, for the flags hot path (`isFlagEnabled` and its
 * siblings, called by handlers for every request, often several times).
 *
 * Run as an effect (`Effect.map(isFlagEnabled(...), ...)`, `Effect.runSync`, a guard), it is one
 * `commit` step. Yielded in `Effect.gen` — how a handler calls it — it takes no fiber step at all:
 * `yield*` asks for its iterator while the generator body runs inside the fiber, so the answer is
 * computed right there (the same fiber, context and `Clock` the step would see) and handed back by
 * an iterator that is already done. A failure is yielded to the fiber as an `Exit`, and without a
 * current fiber (a generator driven by something else) the read is yielded as the effect it is.
 * A fiber step costs more than the evaluation itself (about 0.2 µs of CPU against under 0.1 µs on
 * the bench machine, see `bench/flags/evaluate.ts`), which is what this saves.
 */
import { Effect, Effectable, Exit, Fiber, Option } from "effect"
import { SingleShotGen, YieldWrap } from "effect/Utils"

/** A fiber as a read sees it. */
export type RunningFiber = Fiber.RuntimeFiber<unknown, unknown>

/** An iterator that is done at once, with `value`: `yield*` over it evaluates to `value`. */
class Done<A> {
  private readonly result: IteratorReturnResult<A>
  constructor(value: A) {
    this.result = { done: true, value }
  }
  next(): IteratorReturnResult<A> {
    return this.result
  }
}

/** Answers without an allocation: the two booleans and void. */
export const exitTrue: Exit.Exit<boolean> = Exit.succeed(true)
export const exitFalse: Exit.Exit<boolean> = Exit.succeed(false)
const doneTrue = new Done(true)
const doneFalse = new Done(false)
const doneVoid = new Done(undefined)

const done = <A>(exit: Exit.Success<A, unknown>): Done<A> => {
  const shared: unknown = exit
  return (shared === exitTrue ? doneTrue : shared === exitFalse ? doneFalse : shared === Exit.void ? doneVoid : new Done(exit.value)) as Done<A>
}

const currentFiber = (): RunningFiber | undefined => Option.getOrUndefined(Fiber.getCurrentFiber())

/** Subclasses say how to answer in a given fiber; the class makes it an effect (see the module comment). */
export abstract class FiberRead<A, E = never> extends Effectable.Class<A, E> {
  /** The answer, computed synchronously in `fiber`, the fiber running this read. */
  abstract read(fiber: RunningFiber): Exit.Exit<A, E>

  commit(): Effect.Effect<A, E> {
    // `commit` runs inside the fiber's run loop, so the current fiber is the one running it.
    const fiber = currentFiber()
    return fiber === undefined ? Effect.withFiberRuntime((running) => this.read(running)) : this.read(fiber)
  }

  override [Symbol.iterator](): Effect.EffectGenerator<Effect.Effect<A, E>> {
    const fiber = currentFiber()
    if (fiber === undefined) return new SingleShotGen<YieldWrap<Effect.Effect<A, E>>, A>(new YieldWrap(this))
    const exit = this.read(fiber)
    return Exit.isSuccess(exit) ? done(exit) : new SingleShotGen<YieldWrap<Effect.Effect<A, E>>, A>(new YieldWrap(exit))
  }
}
