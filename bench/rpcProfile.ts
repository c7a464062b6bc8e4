/**
 * CPU profile of the rpc benchmark's server under one kind of load: `post` (autocannon, 32
 * connections on `POST /rpc`) or `ws` (one WebSocket, 32 calls in flight). The server is bundled
 * first (fw's sources inlined, packages left external; removed afterwards) so the profile names fw's functions with
 * their real lines (under tsx every fw frame reads as line 1). Writes the `.cpuprofile` into
 * `<dir>` and prints `bench/profileSummary.ts` of it.
 *
 * `npx tsx bench/rpcProfile.ts post|ws [seconds=8] [dir=/tmp/fw-rpc-profile]`
 */
import autocannon from "autocannon"
import { execFileSync, spawn } from "node:child_process"
import { mkdirSync, readdirSync, rmSync, statSync } from "node:fs"
import * as path from "node:path"
import { fileURLToPath } from "node:url"
import WebSocket from "ws"

const here = path.dirname(fileURLToPath(import.meta.url))
const [mode = "post", secondsArg = "8", dir = "/tmp/fw-rpc-profile"] = process.argv.slice(2)
const seconds = Number(secondsArg)
rmSync(dir, { recursive: true, force: true })
mkdirSync(dir, { recursive: true })
// Next to the sources, so the bundle's imports resolve from the repository's node_modules (ESM has no NODE_PATH).
const bundle = path.join(here, ".rpcServer.profile.mjs")
execFileSync(path.join(here, "..", "node_modules", ".bin", "esbuild"), [
  path.join(here, "rpcServer.ts"),
  "--bundle",
  "--platform=node",
  "--format=esm",
  "--packages=external",
  `--outfile=${bundle}`,
  "--log-level=warning"
], { cwd: path.join(here, "..") })
const server = spawn(process.execPath, ["--cpu-prof", `--cpu-prof-dir=${dir}`, bundle], { stdio: ["ignore", "pipe", "inherit"] })
const port = await new Promise<number>((resolve) =>
  server.stdout.on("data", (data: Buffer) => {
    const match = /PORT (\d+)/.exec(data.toString())
    if (match) resolve(Number(match[1]))
  })
)
const frame = (id: number) =>
  JSON.stringify({ _tag: "Request", id: String(id), tag: "items.get", payload: { id: "i1" }, headers: [["authorization", "Bearer bench"]] })

const overWebSocket = (duration: number) =>
  new Promise<number>((resolve) => {
    const socket = new WebSocket(`ws://127.0.0.1:${port}/rpc`, { headers: { authorization: "Bearer bench" } })
    let next = 0
    let done = 0
    let stopping = false
    socket.on("open", () => {
      setTimeout(() => {
        stopping = true
        socket.close()
        resolve(done)
      }, duration * 1000)
      for (let i = 0; i < 32; i++) socket.send(frame(next++))
    })
    socket.on("message", (data) => {
      if (!data.toString().includes(`"Exit"`)) return
      done++
      if (!stopping) socket.send(frame(next++))
    })
  })

const post = (duration: number) =>
  autocannon({
    url: `http://127.0.0.1:${port}/rpc`,
    method: "POST",
    body: frame(1),
    headers: { authorization: "Bearer bench", "content-type": "application/json" },
    connections: 32,
    duration
  })

// Warm up the path measured (JIT), then profile it; the profile covers the whole process life.
if (mode === "ws") {
  await overWebSocket(2)
  console.log(`ws calls answered: ${await overWebSocket(seconds)}`)
} else {
  await post(2)
  console.log(`POST /rpc req/s: ${(await post(seconds)).requests.average}`)
}
server.kill("SIGINT")
await new Promise((resolve) => server.on("exit", resolve))
rmSync(bundle, { force: true })
const profile = readdirSync(dir).filter((name) => name.endsWith(".cpuprofile"))
  .map((name) => path.join(dir, name))
  .sort((a, b) => statSync(b).size - statSync(a).size)[0]
console.log(`profile: ${profile}`)
if (profile !== undefined) {
  console.log(execFileSync(process.execPath, ["--import", "tsx", path.join(here, "profileSummary.ts"), profile, "40"], { encoding: "utf8" }))
}
