/**
 * Summarises a `.cpuprofile` of a bundled app (the fleet harness's replicas run
 * `test/fleet/.build/app.mjs`, whose frames name the bundle, not the framework's sources): inclusive
 * and self time by source module, found by the bundle's `// src/…` markers, as percentages of the
 * sampled time excluding idle. Effect fibers resume from the runtime's loop, so a module's inclusive
 * time is what runs synchronously under its frames (the effect runtime's own share is not in it).
 *
 * `npx tsx bench/profileBySource.ts <file.cpuprofile> <bundle.mjs> [skipMs] [tailMs]` (leave out the
 * first and the last milliseconds of the profile: start-up, and shut-down or what ran after the load).
 * The bundle must be the one the profile ran (it is rebuilt by every harness run: a changed source
 * shifts the lines of the modules after it).
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

const [file, bundle, skipArg, tailArg] = process.argv.slice(2)
// Where each module of the bundle starts (esbuild writes `// src/kernel/X.ts` before it).
const marks: Array<readonly [number, string]> = []
readFileSync(bundle!, "utf8").split("\n").forEach((line, i) => {
  const match = /^\/\/ ((?:src|test)\/\S+)/.exec(line)
  if (match !== null) marks.push([i, match[1]!])
})
const moduleAt = (line: number) => {
  let lo = 0
  let hi = marks.length - 1
  let found = "(bundle prelude)"
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    if (marks[mid]![0] <= line) {
      found = marks[mid]![1]
      lo = mid + 1
    } else hi = mid - 1
  }
  return found
}

const profile = JSON.parse(readFileSync(file!, "utf8")) as Profile
const byId = new Map(profile.nodes.map((node) => [node.id, node]))
const parentOf = new Map<number, number>()
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id)
const total = profile.timeDeltas.reduce((a, b) => a + b, 0)
const skip = Number(skipArg ?? 0) * 1000
const until = total - Number(tailArg ?? 0) * 1000
const self = new Map<number, number>()
let elapsed = 0
profile.samples.forEach((id, i) => {
  elapsed += profile.timeDeltas[i] ?? 0
  if (elapsed >= skip && elapsed <= until) self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
})
const isBundle = (url: string) => url.endsWith(".mjs") && url.includes("/.build/")
let busy = 0
const inclusive = new Map<string, number>()
const selfByModule = new Map<string, number>()
for (const [id, time] of self) {
  const frame = byId.get(id)!.callFrame
  if (frame.functionName === "(idle)" || frame.functionName === "(program)") continue
  busy += time
  if (isBundle(frame.url)) {
    const module = moduleAt(frame.lineNumber)
    selfByModule.set(module, (selfByModule.get(module) ?? 0) + time)
  }
  const seen = new Set<string>()
  for (let at: number | undefined = id; at !== undefined; at = parentOf.get(at)) {
    const callFrame = byId.get(at)!.callFrame
    if (!isBundle(callFrame.url)) continue
    const module = moduleAt(callFrame.lineNumber)
    if (!seen.has(module)) {
      seen.add(module)
      inclusive.set(module, (inclusive.get(module) ?? 0) + time)
    }
  }
}
const percent = (time: number) => `${((time / busy) * 100).toFixed(1).padStart(5)}%`
console.log(`busy ${(busy / 1000).toFixed(0)} ms (idle and (program) excluded)\n\ninclusive   self   module`)
for (const [module, time] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, 30)) {
  console.log(`${percent(time)}  ${percent(selfByModule.get(module) ?? 0)}  ${module}`)
}
