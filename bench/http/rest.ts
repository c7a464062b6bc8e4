/**
 * A GET REST route with decode, a guard and an ETag under autocannon load, against a bare
 * `HttpLayerRouter` route and a Fastify route doing the same work, measured in the same run in
 * alternating rounds (3 s each), and the fw route again on a server with a tracer installed (every
 * request then gets the platform's span and the framework's spans and metrics, see docs/observability.md), and
 * on the platform's `NodeHttpServer.layer` instead of fw's `NodeServer.layer` (what an app gets from the
 * platform's server: no direct dispatch). Prints req/s, the server process's CPU time per request, and the
 * ratios against Fastify and the bare route. On a loaded shared machine the CPU ratio is the
 * steadier figure: req/s also measures the load generator competing for the same cores.
 *
 * `npx tsx bench/http/rest.ts` (`FW_BENCH_PROFILE=dir` writes the servers' `--cpu-prof` profiles there)
 */
import { measureCpu, median, perSecond, startServer, table } from "./harness.js"

export const run = async () => {
  const profile = process.env.FW_BENCH_PROFILE
  const nodeArgs = profile === undefined ? [] : ["--cpu-prof", "--cpu-prof-dir", profile]
  const fw = await startServer("restServer.ts", nodeArgs)
  const traced = await startServer("restServer.ts", [], { FW_BENCH_TRACER: "1" })
  const platform = await startServer("restServer.ts", [], { FW_BENCH_PLATFORM: "1" })
  const fastify = await startServer("fastifyServer.ts")
  try {
    const headers = { authorization: "Bearer bench" }
    const targets = {
      "fw REST route": { server: fw, url: `http://127.0.0.1:${fw.port}/items/42` },
      "fw REST route, tracer installed": { server: traced, url: `http://127.0.0.1:${traced.port}/items/42` },
      "fw REST route on the platform's NodeHttpServer": { server: platform, url: `http://127.0.0.1:${platform.port}/items/42` },
      "bare HttpLayerRouter route": { server: fw, url: `http://127.0.0.1:${fw.port}/bare/items/42` },
      "Fastify route": { server: fastify, url: `http://127.0.0.1:${fastify.port}/items/42` }
    }
    for (const { server, url } of Object.values(targets)) await measureCpu(server, { url, headers, duration: 2 })
    const results: Record<string, Array<{ perSecond: number; cpu: number }>> = Object.fromEntries(
      Object.keys(targets).map((name) => [name, []])
    )
    for (let round = 0; round < 5; round++) {
      for (const [name, { server, url }] of Object.entries(targets)) {
        const result = await measureCpu(server, { url, headers })
        results[name]!.push({ perSecond: result.perSecond, cpu: result.cpuMicrosPerRequest })
      }
    }
    const ratio = (values: ReadonlyArray<{ perSecond: number; cpu: number }>, peer: ReadonlyArray<{ perSecond: number; cpu: number }>) => ({
      throughput: Number(median(values.map((v, i) => v.perSecond / peer[i]!.perSecond)).toFixed(2)),
      cpu: Number(median(values.map((v, i) => peer[i]!.cpu / v.cpu)).toFixed(2))
    })
    const bare = results["bare HttpLayerRouter route"]!
    const peer = results["Fastify route"]!
    table(
      "GET route with decode, guard and ETag (32 connections; medians of 5 alternating 3 s rounds; ratios are throughput and server CPU per request)",
      Object.entries(results).map(([name, values]) => {
        const vsFastify = ratio(values, peer)
        const vsBare = ratio(values, bare)
        return {
          route: name,
          "req/s": perSecond(median(values.map((v) => v.perSecond))),
          "server CPU µs/req": Number(median(values.map((v) => v.cpu)).toFixed(1)),
          "req/s vs Fastify": vsFastify.throughput,
          "CPU vs Fastify": vsFastify.cpu,
          "req/s vs bare": vsBare.throughput,
          "CPU vs bare": vsBare.cpu
        }
      })
    )
  } finally {
    fw.stop()
    traced.stop()
    platform.stop()
    fastify.stop()
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await run()
