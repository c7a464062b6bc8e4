/**
 * The per-request `Scope` of fw's Node adapter (`NodeServer`), made only when something uses it.
 *
 * Every route may ask for a `Scope` (a streamed body, a WebSocket, a scoped resource), but most
 * never do. This scope holds no state until its first finalizer or fork; then it delegates to an
 * ordinary scope, which `close` closes with the request's exit. Closing an unused one costs nothing.
 */
import type { ExecutionStrategy } from "effect"
import { Effect, Exit, Scope } from "effect"
import { pipeArguments } from "effect/Pipeable"

/**
 * A closeable scope that materialises on first use. Effect's runtime calls a scope's `fork`,
 * `addFinalizer` and `close` methods (internal members of the `Scope` interface).
 */
export class RequestScope implements Scope.CloseableScope {
  readonly [Scope.ScopeTypeId]: Scope.ScopeTypeId = Scope.ScopeTypeId
  readonly [Scope.CloseableScopeTypeId]: Scope.CloseableScopeTypeId = Scope.CloseableScopeTypeId
  readonly strategy: ExecutionStrategy.ExecutionStrategy
  private inner: Scope.CloseableScope | undefined
  private closed: Exit.Exit<unknown, unknown> | undefined

  constructor(strategy: ExecutionStrategy.ExecutionStrategy) {
    this.strategy = strategy
  }

  /** The underlying scope, made now (closed already, it is made closed, so finalizers run at once). */
  private get materialised(): Effect.Effect<Scope.CloseableScope> {
    if (this.inner !== undefined) return Effect.succeed(this.inner)
    return Effect.flatMap(Scope.make(this.strategy), (scope) => {
      // Another fiber of the request got there first: its scope is the one (this one is empty).
      if (this.inner !== undefined) return Effect.as(Scope.close(scope, Exit.void), this.inner)
      this.inner = scope
      return this.closed === undefined ? Effect.succeed(scope) : Effect.as(Scope.close(scope, this.closed), scope)
    })
  }

  fork(strategy: ExecutionStrategy.ExecutionStrategy): Effect.Effect<Scope.CloseableScope> {
    return Effect.flatMap(this.materialised, (scope) => Scope.fork(scope, strategy))
  }

  addFinalizer(finalizer: Scope.Scope.Finalizer): Effect.Effect<void> {
    return Effect.flatMap(this.materialised, (scope) => Scope.addFinalizerExit(scope, finalizer))
  }

  close(exit: Exit.Exit<unknown, unknown>): Effect.Effect<void> {
    return Effect.suspend(() => {
      if (this.closed !== undefined) return Effect.void
      this.closed = exit
      return this.inner === undefined ? Effect.void : Scope.close(this.inner, exit)
    })
  }

  /** Whether anything used the scope (then closing it runs finalizers). */
  get used(): boolean {
    return this.inner !== undefined
  }

  pipe() {
    // eslint-disable-next-line prefer-rest-params
    return pipeArguments(this, arguments)
  }
}
