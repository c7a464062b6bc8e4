/**
 * The `backend` option of `searchPlugin`: `"memory"` (the default), an engine configuration, a
 * custom backend object, or a factory (the sql backend) made in the plugin's scope.
 *
 * Engine backends live in `src/search/engines/<engine>.ts` and export
 * `make(config): Effect<SearchBackendShape, SearchBackendError, Scope>`; they are imported on first
 * use, so an app that does not use an engine never loads its client (the vendors' clients are
 * optional peer dependencies).
 */
import type { Scope } from "effect"
import { Effect } from "effect"
import { SearchBackendError } from "./Errors.js"
import * as Memory from "./Memory.js"
import type { SearchBackendShape } from "./SearchBackend.js"

/** engineA: `{engine: "engineA", url, apiKey}`. */
export interface EngineAConfig {
  readonly engine: "engineA"
  readonly url: string
  readonly apiKey: string
}

/** engineB: `{engine: "engineB", url, apiKey}`. */
export interface EngineBConfig {
  readonly engine: "engineB"
  readonly url: string
  readonly apiKey: string
}

/** engineC: `{engine: "engineC", appId, apiKey}` (hosts derived from the app id). */
export interface EngineCConfig {
  readonly engine: "engineC"
  readonly appId: string
  readonly apiKey: string
  /** Overrides the hosts derived from `appId` (tests point it at a local fake). */
  readonly hosts?: ReadonlyArray<string>
}

/** An external engine's configuration. */
export type EngineConfig = EngineAConfig | EngineBConfig | EngineCConfig

/** A backend the plugin makes in its own scope (for example the sql backend with its own connection). */
export interface BackendFactory {
  readonly _tag: "SearchBackendFactory"
  readonly name: string
  readonly durable: boolean
  /** Hosts the backend talks to (each becomes a `network:outbound:<host>` permission). */
  readonly hosts: ReadonlyArray<string>
  readonly make: Effect.Effect<SearchBackendShape, unknown, Scope.Scope>
}

/** What `searchPlugin({backend})` accepts. */
export type BackendOption = "memory" | EngineConfig | SearchBackendShape | BackendFactory

/** The hosts an engine configuration talks to. */
export const engineHosts = (config: EngineConfig): ReadonlyArray<string> => {
  if (config.engine === "engineC") {
    if (config.hosts !== undefined) return config.hosts.map((host) => new URL(host.includes("://") ? host : `https://${host}`).host)
    const app = config.appId.toLowerCase()
    return [`${app}.algolia.net`, `${app}-dsn.algolia.net`, `${app}-1.algolianet.com`, `${app}-2.algolianet.com`, `${app}-3.algolianet.com`]
  }
  return [new URL(config.url).host]
}

const isFactory = (option: BackendOption): option is BackendFactory =>
  typeof option === "object" && "_tag" in option && option._tag === "SearchBackendFactory"

const isEngine = (option: BackendOption): option is EngineConfig => typeof option === "object" && "engine" in option

/** An engine backend module, as `src/search/engines/<engine>.ts` exports it. */
interface EngineModule {
  readonly make: (config: EngineConfig) => Effect.Effect<SearchBackendShape, SearchBackendError, Scope.Scope>
}

const loadEngine = (config: EngineConfig) =>
  Effect.tryPromise({
    // The specifier is computed so that the module (and its vendor client) loads on first use only.
    try: () => import(/* @vite-ignore */ `./engines/${config.engine}.js`) as Promise<EngineModule>,
    catch: (error) =>
      new SearchBackendError({
        kind: "permanent",
        backend: config.engine,
        operation: "load",
        message: `the ${config.engine} backend could not be loaded (is its client installed?): ${String(error)}`
      })
  }).pipe(Effect.flatMap((module) => module.make(config)))

/** Resolves the option into a factory. */
export const resolve = (option: BackendOption | undefined): BackendFactory => {
  if (option === undefined || option === "memory") {
    return { _tag: "SearchBackendFactory", name: "memory", durable: false, hosts: [], make: Effect.sync(Memory.make) }
  }
  if (isFactory(option)) return option
  if (isEngine(option)) {
    return { _tag: "SearchBackendFactory", name: option.engine, durable: true, hosts: engineHosts(option), make: loadEngine(option) }
  }
  const custom = option
  return {
    _tag: "SearchBackendFactory",
    name: custom.name,
    durable: custom.durable ?? true,
    hosts: [],
    make: Effect.succeed(custom)
  }
}
