/**
 * One client process of the SSE fan-out benchmark: opens `count` SSE streams to each of `targets`
 * and, once every stream that sees the delta of value `n` has it, tells the parent when each
 * arrived (wall-clock ms, comparable across processes of one machine).
 *
 * The parser is minimal on purpose (split on the blank line, read the `event:` and `data:` lines,
 * parse the JSON): the clients' own CPU is part of what the benchmark measures end to end, and it
 * should not be the floor.
 *
 * Forked by `bench/http/sse.ts` with IPC; not run by hand.
 */
import { request } from "node:http"

/** From the parent: where to connect, how many streams to each target. */
export interface Start {
  readonly targets: ReadonlyArray<{ readonly port: number; readonly path: string }>
  readonly count: number
}

/** To the parent: all streams are open, or every stream of one target has the delta of `n`. */
export type Report =
  | { readonly _tag: "Ready" }
  | { readonly _tag: "Delivered"; readonly n: number; readonly times: ReadonlyArray<number> }

const now = () => performance.timeOrigin + performance.now()
const send = (report: Report) => process.send!(report)

/** The `data:` of a `delta` frame, or undefined for any other frame. */
const deltaOf = (frame: string): string | undefined => {
  const event = frame.indexOf("event: delta\n")
  if (event === -1) return undefined
  const data = frame.indexOf("data: ", event)
  return data === -1 ? undefined : frame.slice(data + 6, frame.indexOf("\n", data) === -1 ? undefined : frame.indexOf("\n", data))
}

process.once("message", async ({ targets, count }: Start) => {
  // Per value: when each stream that got it got it, and how many are still to come.
  const arrivals = new Map<number, Array<number>>()
  const arrived = (n: number, at: number) => {
    let times = arrivals.get(n)
    if (times === undefined) arrivals.set(n, times = [])
    times.push(at)
    if (times.length < count) return
    arrivals.delete(n)
    send({ _tag: "Delivered", n, times })
  }
  const open = (port: number, path: string) =>
    new Promise<void>((resolve, reject) => {
      let pending = ""
      const req = request({ host: "127.0.0.1", port, path, agent: false, headers: { accept: "text/event-stream" } }, (res) => {
        res.setEncoding("utf8")
        res.on("data", (text: string) => {
          const at = now()
          pending += text
          let end: number
          while ((end = pending.indexOf("\n\n")) !== -1) {
            const data = deltaOf(pending.slice(0, end + 1))
            pending = pending.slice(end + 2)
            if (data !== undefined) arrived((JSON.parse(data) as { readonly data: number }).data, at)
          }
        })
        resolve()
      })
      req.on("error", reject)
      req.end()
    })
  for (const { path, port } of targets) {
    // In slices, so the server's accept backlog is never the bottleneck of the setup.
    for (let i = 0; i < count; i += 50) {
      await Promise.all(Array.from({ length: Math.min(50, count - i) }, () => open(port, path)))
    }
  }
  send({ _tag: "Ready" })
  process.once("disconnect", () => process.exit(0))
})
