/**
 * One client process of the SSE fan-out benchmark: opens `count` SSE streams to `path` and, once
 * every stream of this process has the delta of value `n`, tells the parent when the last one
 * arrived and when each did (wall-clock ms, comparable across processes of one machine).
 *
 * Forked by `bench/http/sse.ts` with IPC; not run by hand.
 */
import * as ExperimentalSse from "@effect/experimental/Sse"
import { request } from "node:http"

/** From the parent: where to connect, how many streams. */
export interface Start {
  readonly port: number
  readonly path: string
  readonly count: number
}

/** To the parent: all streams are open, or every stream of this process has the delta of `n`. */
export type Report =
  | { readonly _tag: "Ready" }
  | { readonly _tag: "Delivered"; readonly n: number; readonly times: ReadonlyArray<number> }

const now = () => performance.timeOrigin + performance.now()
const send = (report: Report) => process.send!(report)

process.once("message", async ({ port, path, count }: Start) => {
  const received = Array.from({ length: count }, () => new Map<number, number>())
  const pending = new Map<number, number>()
  const arrived = (n: number) => {
    const left = (pending.get(n) ?? count) - 1
    if (left > 0) return void pending.set(n, left)
    pending.delete(n)
    send({ _tag: "Delivered", n, times: received.map((seen) => seen.get(n)!) })
    for (const seen of received) seen.delete(n)
  }
  await Promise.all(Array.from({ length: count }, (_, index) =>
    new Promise<void>((resolve, reject) => {
      const parser = ExperimentalSse.makeParser((event) => {
        if (event._tag !== "Event" || event.event !== "delta") return
        const n = (JSON.parse(event.data) as { readonly data: number }).data
        received[index]!.set(n, now())
        arrived(n)
      })
      const req = request({ host: "127.0.0.1", port, path, agent: false, headers: { accept: "text/event-stream" } }, (res) => {
        res.setEncoding("utf8")
        res.on("data", (text: string) => parser.feed(text))
        resolve()
      })
      req.on("error", reject)
      req.end()
    })))
  send({ _tag: "Ready" })
  process.once("disconnect", () => process.exit(0))
})
