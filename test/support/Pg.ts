/**
 * PostgreSQL for tests: each suite gets a fresh database, dropped when its scope closes.
 */
import type { SqlClient } from "@effect/sql"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, Redacted, type Scope } from "effect"
import pg from "pg"
import { inject } from "vitest"

/** The server URL, or null when PostgreSQL is unavailable (the suites then skip with a printed reason). */
export const serverUrl: string | null = inject("pgUrl")

/** Why PostgreSQL cases are skipped, printed once per suite. */
export const skipReason = "PostgreSQL is not reachable (set FW_TEST_PG_URL): skipping PostgreSQL cases"

const withAdmin = async <A>(f: (client: pg.Client) => Promise<A>): Promise<A> => {
  const client = new pg.Client({ connectionString: serverUrl! })
  await client.connect()
  try {
    return await f(client)
  } finally {
    await client.end()
  }
}

/** Creates a fresh database and returns its URL; drops it when the scope closes. */
export const freshDatabase: Effect.Effect<string, never, Scope.Scope> = Effect.acquireRelease(
  Effect.promise(async () => {
    const name = `fw_t_${Date.now().toString(36)}_${Math.random().toString(36).slice(2, 8)}`
    await withAdmin((c) => c.query(`CREATE DATABASE ${name}`))
    const url = new URL(serverUrl!)
    url.pathname = `/${name}`
    return url.toString()
  }),
  (url) =>
    Effect.promise(() =>
      withAdmin((c) => c.query(`DROP DATABASE IF EXISTS ${new URL(url).pathname.slice(1)} WITH (FORCE)`))
    ).pipe(Effect.ignore)
)

/** A PgClient layer on a fresh database. */
export const layerFreshClient: Layer.Layer<PgClient.PgClient | SqlClient.SqlClient> = Layer
  .unwrapScoped(
    Effect.map(freshDatabase, (url) => PgClient.layer({ url: Redacted.make(url) }))
  ).pipe(Layer.orDie)

/** A PgClient layer on an existing database URL (for a second "process" sharing one database). */
export const layerClient = (url: string) => PgClient.layer({ url: Redacted.make(url) }).pipe(Layer.orDie)

/** A raw `pg` connection of its own (for holding a transaction open exactly where a test wants), ended with the scope. */
export const connection = (url: string): Effect.Effect<pg.Client, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.promise(async () => {
      const client = new pg.Client({ connectionString: url })
      await client.connect()
      return client
    }),
    (client) => Effect.promise(() => client.end().catch(() => undefined))
  )
