/**
 * Summarises a `.cpuprofile` (from `node --cpu-prof`): self time by package or source folder and the
 * heaviest functions, as percentages of the sampled time excluding idle.
 *
 * `npx tsx bench/profileSummary.ts <file.cpuprofile> [top] [skipMs] [tailMs]` (`skipMs`: leave out the
 * first milliseconds of the profile, the process's start-up, to see the steady state under load;
 * `tailMs`: leave out its last milliseconds, the shut-down and what ran after the load)
 */
import { readFileSync } from "node:fs"

interface Node {
  readonly id: number
  readonly children?: ReadonlyArray<number>
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
}
interface Profile {
  readonly nodes: ReadonlyArray<Node>
  readonly samples: ReadonlyArray<number>
  readonly timeDeltas: ReadonlyArray<number>
}

/** The package (`effect`, `@effect/platform`, ...) or `src/<folder>` a script URL belongs to. */
const owner = (url: string): string => {
  if (url === "") return "(native)"
  const modules = /node_modules\/((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (modules) return modules[1]!
  const source = /\/(src|bench)\/([^/]+)/.exec(url)
  if (source) return `${source[1]}/${source[2]}`
  if (url.startsWith("node:")) return "node:*"
  return url
}

const [file, topArg, skipArg, tailArg] = process.argv.slice(2)
const profile = JSON.parse(readFileSync(file!, "utf8")) as Profile
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const self = new Map<number, number>()
const skip = Number(skipArg ?? 0) * 1000
const total = profile.timeDeltas.reduce((a, b) => a + b, 0)
const until = total - Number(tailArg ?? 0) * 1000
let elapsed = 0
profile.samples.forEach((id, i) => {
  elapsed += profile.timeDeltas[i] ?? 0
  if (elapsed >= skip && elapsed <= until) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})
let busy = 0
const byOwner = new Map<string, number>()
const byFunction = new Map<string, number>()
for (const [id, time] of self) {
  const frame = byId.get(id)!.callFrame
  if (frame.functionName === "(idle)" || frame.functionName === "(program)") continue
  busy += time
  const who = owner(frame.url)
  byOwner.set(who, (byOwner.get(who) ?? 0) + time)
  const name = `${frame.functionName || "(anonymous)"} ${who}/${frame.url.split("/").pop()}:${frame.lineNumber + 1}`
  byFunction.set(name, (byFunction.get(name) ?? 0) + time)
}
const show = (title: string, entries: Map<string, number>, top: number) => {
  console.log(`\n${title}`)
  for (const [name, time] of [...entries].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`${((time / busy) * 100).toFixed(1).padStart(5)}%  ${name}`)
  }
}
console.log(`busy ${(busy / 1000).toFixed(0)} ms (idle and (program) excluded)`)
show("self time by package / folder", byOwner, 15)
show("self time by function", byFunction, Number(topArg ?? 30))

// Inclusive time by package: the share of busy time spent in or under each package's frames (the
// effect runtime's share of a request, say, whoever it then calls).
const parentOf = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
const inclusive = new Map<string, number>()
for (const [id, time] of self) {
  const frame = byId.get(id)!.callFrame
  if (frame.functionName === "(idle)" || frame.functionName === "(program)") continue
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const who = owner(byId.get(at)!.callFrame.url)
    if (who !== "(native)" && !seen.has(who)) {
      seen.add(who)
      inclusive.set(who, (inclusive.get(who) ?? 0) + time)
    }
  }
}
show("inclusive time by package / folder (in or under its frames)", inclusive, 15)

// Inclusive time by function: the share of busy time spent in or under each function's frames
// (counted once per sample however often the function recurs on the stack). Effect fibers resume
// from the runtime's loop, so a src function's inclusive time is what runs synchronously under it.
// `FW_PROF_MATCH=<regex>` keeps the functions whose name or file matches (say `src/`).
const match = new RegExp(process.env.FW_PROF_MATCH ?? ".")
const inclusiveFunction = new Map<string, number>()
for (const [id, time] of self) {
  const frame = byId.get(id)!.callFrame
  if (frame.functionName === "(idle)" || frame.functionName === "(program)") continue
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const callFrame = byId.get(at)!.callFrame
    if (callFrame.url === "") continue
    const name = `${callFrame.functionName || "(anonymous)"} ${owner(callFrame.url)}/${callFrame.url.split("/").pop()}:${callFrame.lineNumber + 1}`
    if (!seen.has(name) && match.test(name)) {
      seen.add(name)
      inclusiveFunction.set(name, (inclusiveFunction.get(name) ?? 0) + time)
    }
  }
}
show("inclusive time by function (in or under its frames)", inclusiveFunction, Number(topArg ?? 30))
