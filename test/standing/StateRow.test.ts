/**
 * The state-row protocol of one replica (ExpectationStateRow), driven by hand: which revisions it
 * adopts, which it records over, whichever path (change tap, locked read) it hears them by.
 */
import { assert, describe, it } from "@effect/vitest"
import { Effect, Option } from "effect"
import * as Store from "../../src/kernel/store/Store.js"
import * as ExpectationStateRow from "../../src/standing/ExpectationStateRow.js"
import type { Tracked } from "../../src/standing/ExpectationStateRow.js"
import { ExpectationState } from "../../src/standing/index.js"
import { storeTier } from "./support.js"

const cause = (traceId: string) => ({ traceId, subjectId: null, procedure: null, table: "orders", op: "insert" as const, rowId: traceId, at: 0 })

/** A replica's bookkeeping, moved into `status` at `since` by `trace` (a change of status, as the engine makes it). */
const moved = (stateRow: ReturnType<typeof ExpectationStateRow.make>, tracked: Tracked, status: Tracked["status"], since: number, trace: string) => {
  tracked.status = status
  tracked.since = since
  tracked.lastCause = cause(trace)
  stateRow.began(tracked)
}

const fresh = (): Tracked => ({ status: "unknown", since: null, lastCause: null, ...ExpectationStateRow.initial })

/** A state row as a change carries it. */
const row = (revision: number, status: Tracked["status"], since: number, trace: string, writer: string) => ({
  id: "x",
  status,
  since,
  cause: cause(trace),
  revision,
  writer,
  updatedAt: 0
})

const shown = (tracked: Tracked) => [tracked.status, tracked.since, tracked.lastCause?.traceId]

describe("expectation state row", () => {
  it.scoped("its own write for an episode it has since left is not adopted, and the next settle records the current start", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const stateRow = ExpectationStateRow.make(store, "me")
      const tracked = fresh()
      moved(stateRow, tracked, "holding", 10, "h1") // episode 1
      moved(stateRow, tracked, "violated", 20, "v") // episode 2
      moved(stateRow, tracked, "holding", 30, "h2") // episode 3
      // Its write of episode 1 (settled before the flap, its change heard only now).
      stateRow.heard(tracked, row(1, "holding", 10, "h1", "me#1"))
      assert.deepStrictEqual(shown(tracked), ["holding", 30, "h2"])
      yield* store.insert(ExpectationState, row(1, "holding", 10, "h1", "me#1"))
      yield* stateRow.persist(tracked, "x")
      const stored = yield* store.get(ExpectationState, "x")
      assert.deepStrictEqual(Option.map(stored, (r) => [r.revision, r.status, r.since, r.writer]), Option.some([2, "holding", 30, "me#3"]))
      assert.deepStrictEqual(shown(tracked), ["holding", 30, "h2"])
    }).pipe(Effect.provide(storeTier(null))))

  it.scoped("another replica's later revision of the same status is adopted; an older one is not", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const stateRow = ExpectationStateRow.make(store, "me")
      const tracked = fresh()
      moved(stateRow, tracked, "holding", 10, "mine")
      stateRow.heard(tracked, row(3, "holding", 50, "theirs-3", "other#4"))
      assert.deepStrictEqual(shown(tracked), ["holding", 50, "theirs-3"])
      stateRow.heard(tracked, row(2, "holding", 40, "theirs-2", "other#3")) // late: already past it
      assert.deepStrictEqual(shown(tracked), ["holding", 50, "theirs-3"])
      stateRow.heard(tracked, row(4, "violated", 60, "theirs-4", "other#5")) // another status: kept apart
      assert.deepStrictEqual(shown(tracked), ["holding", 50, "theirs-3"])
    }).pipe(Effect.provide(storeTier(null))))

  it.scoped("a revision heard in another status is adopted by the settle after moving to its status (the first recorded start wins)", () =>
    Effect.gen(function*() {
      const store = yield* Store.Store
      const stateRow = ExpectationStateRow.make(store, "me")
      const tracked = fresh()
      moved(stateRow, tracked, "holding", 10, "mine")
      const theirs = row(1, "violated", 15, "theirs", "other#2")
      yield* store.insert(ExpectationState, theirs)
      stateRow.heard(tracked, theirs)
      assert.deepStrictEqual(shown(tracked), ["holding", 10, "mine"])
      moved(stateRow, tracked, "violated", 20, "mine-later")
      yield* stateRow.persist(tracked, "x")
      assert.deepStrictEqual(shown(tracked), ["violated", 15, "theirs"])
      const stored = yield* store.get(ExpectationState, "x")
      assert.deepStrictEqual(Option.map(stored, (r) => r.revision), Option.some(1)) // nothing written
    }).pipe(Effect.provide(storeTier(null))))
})
