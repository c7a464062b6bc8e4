/**
 * The fleet harness's plumbing: replicas as child processes, their clients, and the ground truth
 * read straight from PostgreSQL.
 */
import { Effect } from "effect"
import { build } from "esbuild"
import { spawn } from "node:child_process"
import type { ChildProcess } from "node:child_process"
import * as path from "node:path"
import pg from "pg"
import * as Client from "../../src/client/Client.js"
import { app } from "./app.js"

/** A running replica. */
export interface Replica {
  readonly name: string
  readonly url: string
  readonly child: ChildProcess
  readonly client: Client.Client
}

/**
 * A test app bundled once per test run (a bundle starts in a fraction of the time `tsx` needs to
 * transform the framework's sources in every process); packages stay external, resolved from the
 * repository's node_modules.
 */
const bundles = new Map<string, Promise<string>>()
export const bundleApp = (file: string): Promise<string> => {
  let bundled = bundles.get(file)
  if (bundled === undefined) {
    const outfile = path.join(import.meta.dirname, ".build", path.basename(file).replace(/\.ts$/, ".mjs"))
    bundled = build({
      entryPoints: [path.join(import.meta.dirname, file)],
      bundle: true,
      platform: "node",
      format: "esm",
      packages: "external",
      outfile,
      logLevel: "warning"
    }).then(() => outfile)
    bundles.set(file, bundled)
  }
  return bundled
}

/**
 * Runs `node appPath` as replica `name`, killed (if still alive) when the scope closes. Ready once
 * it has printed `PORT n` and answers `/_fw/health`: each probe is cut short, since a request that
 * reaches a listener before its routes are attached is never answered.
 */
export const spawnApp = (name: string, appPath: string, env: Record<string, string>, nodeArgs: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const child = yield* Effect.acquireRelease(
      Effect.sync(() =>
        spawn(process.execPath, [...nodeArgs, appPath], {
          env: { ...process.env, FW_REPLICA: name, ...env },
          stdio: ["ignore", "pipe", "pipe"]
        })
      ),
      (child) => Effect.sync(() => child.exitCode === null && child.kill("SIGKILL"))
    )
    const port = yield* Effect.async<number, Error>((resume) => {
      let out = ""
      let err = ""
      child.stdout!.on("data", (chunk: Buffer) => {
        out += chunk.toString()
        const match = /PORT (\d+)/.exec(out)
        if (match !== null) resume(Effect.succeed(Number(match[1])))
      })
      child.stderr!.on("data", (chunk: Buffer) => void (err += chunk.toString()))
      // Effect's logger writes to stdout: both streams say why a replica stopped.
      child.on("exit", (code) => resume(Effect.fail(new Error(`replica ${name} exited (${code}): ${err.slice(-2000)} ${out.slice(-2000)}`))))
    }).pipe(Effect.timeout("60 seconds"), Effect.orDie)
    const url = `http://127.0.0.1:${port}`
    yield* Effect.promise(async () => {
      for (let attempt = 0; attempt < 100; attempt++) {
        const ok = await fetch(`${url}/_fw/health`, { signal: AbortSignal.timeout(500) }).then((r) => r.ok, () => false)
        if (ok) return
        await new Promise((resolve) => setTimeout(resolve, 100))
      }
      throw new Error(`replica ${name} never became ready`)
    })
    return { child, url }
  })

/**
 * Starts a fleet-harness replica on `databaseUrl`; killed (if still alive) when the scope closes.
 * `nodeArgs` go to node before the app (the benchmark's `--cpu-prof`).
 */
export const start = (name: string, databaseUrl: string, env: Record<string, string> = {}, nodeArgs: ReadonlyArray<string> = []) =>
  Effect.gen(function*() {
    const appPath = yield* Effect.promise(() => bundleApp("app.ts"))
    const { child, url } = yield* spawnApp(name, appPath, { DATABASE_URL: databaseUrl, ...env }, nodeArgs)
    const client = yield* Client.connect(app.procedures.values(), Client.layerHttp(`${url}/rpc`))
    return { name, url, child, client } satisfies Replica
  })

/** kill -9. */
export const kill = (replica: Replica) => Effect.sync(() => void replica.child.kill("SIGKILL"))

/** What a replica received: `id:title`, in delivery order. */
export const eventsOf = (replica: Replica) =>
  Effect.promise(async () => {
    const response = await fetch(`${replica.url}/_events`)
    const events = (await response.json()) as Array<{ readonly id: string; readonly title: string | null }>
    return events.map((event) => `${event.id}:${event.title}`)
  })

/** Runs `f` with a client of its own on `url`. */
export const withPg = <A>(url: string, f: (client: pg.Client) => Promise<A>) =>
  Effect.promise(async () => {
    const client = new pg.Client({ connectionString: url })
    await client.connect()
    try {
      return await f(client)
    } finally {
      await client.end()
    }
  })

/** The committed truth: every recorded version of every doc, and every doc as stored. */
export const truth = (url: string) =>
  withPg(url, async (client) => {
    const versions = await client.query<{ rowId: string; version: number; title: string | null }>(
      `SELECT "rowId", "version"::int AS version, "data"->>'title' AS title FROM _fw_row_history WHERE "tableName" = 'docs' ORDER BY "rowId", "version"`
    )
    const docs = await client.query<{ id: string; title: string }>(`SELECT id, title FROM docs`)
    return { versions: versions.rows, docs: new Map(docs.rows.map((row) => [row.id, row.title])) }
  })

/**
 * The invariants of row history: per row, versions 1..n without gaps, and the newest version is the
 * committed row. Returns the problems found.
 */
export const historyProblems = (state: Effect.Effect.Success<ReturnType<typeof truth>>) => {
  const problems: Array<string> = []
  const byRow = new Map<string, Array<{ version: number; title: string | null }>>()
  for (const version of state.versions) {
    if (!byRow.has(version.rowId)) byRow.set(version.rowId, [])
    byRow.get(version.rowId)!.push(version)
  }
  for (const [id, versions] of byRow) {
    versions.forEach((version, index) => {
      if (version.version !== index + 1) problems.push(`${id}: version ${version.version} at position ${index + 1}`)
    })
    const newest = versions[versions.length - 1]!
    if (newest.title !== (state.docs.get(id) ?? null)) problems.push(`${id}: newest version ${newest.title}, row ${state.docs.get(id)}`)
  }
  for (const id of state.docs.keys()) if (!byRow.has(id)) problems.push(`${id}: no history`)
  return problems
}

/** Counts of each item. */
export const multiset = (items: ReadonlyArray<string>) => {
  const counts = new Map<string, number>()
  for (const item of items) counts.set(item, (counts.get(item) ?? 0) + 1)
  return counts
}

/** Differences between what a replica received and what was expected (missing, doubled, extra). */
export const deliveryProblems = (name: string, received: ReadonlyArray<string>, expected: ReadonlyArray<string>) => {
  const got = multiset(received)
  const want = multiset(expected)
  const problems: Array<string> = []
  for (const [item, n] of want) if ((got.get(item) ?? 0) !== n) problems.push(`${name}: ${item} received ${got.get(item) ?? 0}×`)
  for (const [item, n] of got) if (!want.has(item)) problems.push(`${name}: ${item} unexpected (${n}×)`)
  return problems
}

/** Polls `check` (live, every 100 ms, for up to 30 s) until `until` holds; returns the last value either way. */
export const eventually = <A>(check: Effect.Effect<A>, until: (a: A) => boolean): Effect.Effect<A> =>
  Effect.gen(function*() {
    const deadline = Date.now() + 30_000
    let value = yield* check
    while (!until(value) && Date.now() < deadline) {
      yield* Effect.sleep("100 millis")
      value = yield* check
    }
    return value
  })
