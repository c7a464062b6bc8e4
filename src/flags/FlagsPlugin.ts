/**
 * `flagsPlugin`: feature flags for an app (spec area E). It offers the `FlagRegistry` to every guard
 * and handler (`isFlagEnabled`, `requireFlag`, `flagValue`, `flagVariant`), serves the live
 * `flags.evaluate` and `flags.variants` queries (what the client hooks read), gates procedures by tag (`gatedBy`), and adds inspect routes. With
 * `store: 'sql'` toggles and overrides are persisted, audited and followed by every replica.
 */
import { Context, Duration, Effect, Layer, Schedule, Schema } from "effect"
import * as Plugin from "../app/Plugin.js"
import * as Procedure from "../app/Procedure.js"
import { FlagDisabled } from "../app/Guard.js"
import { noteRead } from "../kernel/changes/ReadTracking.js"
import { Store } from "../kernel/store/Store.js"
import type * as Definition from "./Definition.js"
import { FlagDefinitionError } from "./Errors.js"
import * as Experiments from "./Experiments.js"
import * as FlagRegistry from "./FlagRegistry.js"
import * as ClientVariants from "./ClientVariants.js"
import * as Dashboard from "./dashboard.js"
import * as Inspect from "./inspect.js"
import * as tables from "./tables.js"
import type * as TypedFlag from "./TypedFlag.js"

/** Options of `flagsPlugin` (spec 2.11). */
export interface Options {
  /** Untyped flags by key. */
  readonly flags?: Readonly<Record<string, Definition.Flag>>
  /**
   * Procedure tag (exact, or `/regex/`) → flag key. A gated call fails `FlagDisabled` before its
   * guards and handler when the flag is off for the caller; exact tags win over patterns.
   */
  readonly gatedBy?: Readonly<Record<string, string>>
  /** `defineFlag` results; keys share one namespace with `flags` (both is refused). */
  readonly typedFlags?: ReadonlyArray<TypedFlag.Any>
  /** Experiments flags may feed (`defineFlag({experiment})`); checked by refusal 4. */
  readonly experiments?: ReadonlyArray<Experiments.ExperimentLike>
  /** Where live state is kept: `'memory'` (default, this process) or `'sql'` (persisted, audited, fleet-wide). */
  readonly store?: "memory" | "sql"
  readonly usage?: FlagRegistry.Config["usage"]
}

/** The `flags.evaluate` query: the caller's flag set, live over the socket. */
export const evaluateTag = "flags.evaluate"

/** The plugin's name (its inspect routes live under `/_fw/inspect/plugins/flags`). */
export const name = "flags"

/**
 * The `flags.evaluate` query (no input; the caller's map of flag key to boolean). Over the socket it
 * is live: a toggle or override pushes the new set. A bulk delivery: it never counts as use. Typed
 * clients connect with this definition.
 */
export const flagsEvaluate = Procedure.query(evaluateTag, {
  input: Schema.Struct({}),
  output: Schema.Record({ key: Schema.String, value: Schema.Boolean }),
  handler: (_input, ctx) =>
    Effect.flatMap(Effect.serviceOption(FlagRegistry.FlagRegistry), (registry) =>
      registry._tag === "None"
        ? Effect.dieMessage("flags.evaluate: no FlagRegistry (the flags plugin offers it)")
        : Effect.zipRight(noteRead(registry.value.sourceName), registry.value.snapshot(ctx.subject)))
})

interface Gate {
  readonly match: (tag: string) => boolean
  readonly flag: string
}

const gatesOf = (gatedBy: Readonly<Record<string, string>>, known: ReadonlySet<string>): ReadonlyArray<Gate> => {
  const exact: Array<Gate> = []
  const patterns: Array<Gate> = []
  for (const [pattern, flag] of Object.entries(gatedBy)) {
    if (!known.has(flag)) throw new FlagDefinitionError(`gatedBy "${pattern}": no flag "${flag}"`)
    const regex = /^\/(.*)\/([a-z]*)$/.exec(pattern)
    if (regex === null) {
      exact.push({ match: (tag) => tag === pattern, flag })
      continue
    }
    let compiled: RegExp
    try {
      // Without `g` and `y`: either makes `test` resume at `lastIndex`, so the next tag would be
      // tested from the middle and could pass ungated.
      compiled = new RegExp(regex[1]!, regex[2]!.replace(/[gy]/g, ""))
    } catch (error) {
      throw new FlagDefinitionError(`gatedBy "${pattern}": invalid pattern (${error instanceof Error ? error.message : String(error)})`)
    }
    patterns.push({ match: (tag) => compiled.test(tag), flag })
  }
  return [...exact, ...patterns]
}

/** The flags plugin, with its registry (the same one its handlers see). */
export interface FlagsPlugin extends Plugin.Plugin {
  readonly registry: FlagRegistry.FlagRegistryShape
}

/**
 * Declares the flags plugin. Throws `FlagDefinitionError` on an invalid flag and on the
 * construction refusals of spec 7.1 (1 key in both `flags` and `typedFlags`, 2 usage tracking on
 * the memory store, 3 `staleAfterDays` above `retentionDays`, 4 a flag's experiment that does not
 * read the flag's arms).
 */
export const flagsPlugin = (options: Options = {}): FlagsPlugin => {
  const store = options.store ?? "memory"
  const registry = FlagRegistry.make({
    ...(options.flags !== undefined ? { flags: options.flags } : {}),
    ...(options.typedFlags !== undefined ? { typedFlags: options.typedFlags } : {}),
    ...(options.usage !== undefined ? { usage: options.usage } : {}),
    ...(options.experiments !== undefined ? { experiments: options.experiments } : {}),
    store
  })
  Experiments.check(options.typedFlags ?? [], options.experiments ?? [])
  const gates = gatesOf(options.gatedBy ?? {}, new Set(registry.keys))
  // Which flag gates a tag is fixed by the definitions: decide once per tag.
  const gateOf = new Map<string, string | null>()
  const flagFor = (tag: string) => {
    let flag = gateOf.get(tag)
    if (flag === undefined) {
      flag = gates.find((gate) => gate.match(tag))?.flag ?? null
      gateOf.set(tag, flag)
    }
    return flag
  }

  const interceptors: ReadonlyArray<Plugin.Interceptor> = gates.length === 0 ? [] : (["query", "mutation", "action"] as const).map((kind) => ({
    kind,
    intercept: (call, next) => {
      const flag = flagFor(call.tag)
      if (flag === null) return next
      // One fiber step: the evaluation is synchronous, on the fiber's Clock.
      return Effect.withFiberRuntime((fiber) =>
        registry.evaluateSync(flag, call.subject, fiber, "gatedBy") ? next : Effect.fail(new FlagDisabled({ flag }))
      )
    }
  }))


  const permissions: Array<Plugin.Permission> = ["inspect:read", "inspect:write"]
  if (gates.length > 0) permissions.push("rpc:intercept:query", "rpc:intercept:mutation", "rpc:intercept:action")
  if (store === "sql") permissions.push("store:write", "store:changes:read")

  const usage = registry.usageOptions
  const background = Layer.scopedDiscard(Effect.gen(function*() {
    yield* registry.attach(yield* Store)
    if (!usage.track) return
    yield* registry.flushUsage.pipe(
      Effect.catchAll((error) => Effect.logWarning("flags: usage flush failed; counts kept for the next flush", error)),
      Effect.repeat(Schedule.spaced(Duration.millis(usage.flushIntervalMs))),
      Effect.delay(Duration.millis(usage.flushIntervalMs)),
      Effect.forkScoped
    )
    const sweepEvery = Math.min(3_600_000, usage.retentionDays * 86_400_000)
    yield* registry.sweepUsage.pipe(
      Effect.catchAll((error) => Effect.logWarning("flags: usage retention sweep failed", error)),
      Effect.repeat(Schedule.spaced(Duration.millis(sweepEvery))),
      Effect.forkScoped
    )
    // What was counted since the last flush is written at shutdown.
    yield* Effect.addFinalizer(() => registry.flushUsage.pipe(Effect.ignore))
  }))

  return {
    name,
    permissions,
    registry,
    ...(store === "sql"
      ? {
        tables: tables.all,
        layer: background,
        onChangeEvent: (event) => event.table === tables.FlagState.name ? registry.applyChange(event) : Effect.void
      }
      : {}),
    inspectRoutes: Inspect.routes(registry),
    dashboardPanel: Dashboard.panel,
    procedures: [flagsEvaluate, ClientVariants.make(registry, options.typedFlags ?? [])],
    interceptors,
    handlerContext: Context.make(FlagRegistry.FlagRegistry, registry),
    liveSources: [{ name: registry.sourceName, changes: registry.changes }]
  }
}
