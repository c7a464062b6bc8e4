/**
 * With a tracer installed a store's point reads and inserts go through the SQL client (the direct
 * paths are skipped): each operation has its `fw.store` span with a `sql.execute` child.
 */
import { assert } from "@effect/vitest"
import { Effect, Option, Tracer } from "effect"

/** Effect's own tracer, wrapped so that it counts as installed (the direct paths step aside), recording every span. */
export const recordingTracer = Effect.map(Effect.tracer, (native) => {
  const spans: Array<Tracer.Span> = []
  const tracer = Tracer.make({
    context: native.context,
    span: (...args) => {
      const span = native.span(...args)
      spans.push(span)
      return span
    }
  })
  return { tracer, spans }
})

/** Runs `insertAndGet` under a recording tracer and checks the spans of `insert` and `get`. */
export const assertThroughClient = <E, R>(insertAndGet: Effect.Effect<void, E, R>) =>
  Effect.gen(function*() {
    const { spans, tracer } = yield* recordingTracer
    yield* Effect.withTracer(insertAndGet, tracer)
    for (const operation of ["insert", "get"]) {
      const span = spans.find((s) => s.name === `fw.store ${operation}`)
      assert.isDefined(span, `a fw.store ${operation} span among ${spans.map((s) => s.name).join(", ")}`)
      const statement = spans.find((s) =>
        s.name === "sql.execute" && Option.isSome(s.parent) && s.parent.value.spanId === span!.spanId
      )
      assert.isDefined(statement, `fw.store ${operation} has a sql.execute child`)
    }
  })
