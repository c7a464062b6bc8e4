// Preloaded into a replica (`NODE_OPTIONS=--import …`, which refuses `--cpu-prof`) by
// `bench/fleet/fleet.ts` under FW_BENCH_PROFILE: samples the process and writes
// `<FW_CPU_PROFILE_DIR>/<pid>.cpuprofile` as it exits (an in-process inspector session answers
// synchronously, so this works inside the exit handler).
import { writeFileSync } from "node:fs"
import { Session } from "node:inspector"

const dir = process.env.FW_CPU_PROFILE_DIR
if (dir !== undefined) {
  const session = new Session()
  session.connect()
  session.post("Profiler.enable")
  session.post("Profiler.start")
  process.once("exit", () => {
    session.post("Profiler.stop", (error, result) => {
      if (error === null) writeFileSync(`${dir}/${process.pid}.cpuprofile`, JSON.stringify(result.profile))
    })
  })
}
