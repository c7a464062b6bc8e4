/**
 * A page on another origin than the notes example: it mounts the example's api by absolute URL
 * without `authHeaders` and records who it is and what the live list answers.
 */
import { mount } from "../../../src/client/index.js"
import type { ClientError } from "../../../src/client/index.js"
import { listNotes, me } from "../../../examples/notes/contracts.js"

const global = globalThis as unknown as { notesApi: string; result: { me?: string; list?: string } }
const api = mount({ apis: { notes: { url: global.notesApi } } }).apis.notes
global.result = {}
api.call(me, {}).then(
  (who) => global.result.me = who === null ? "anonymous" : who.name,
  (error: ClientError) => global.result.me = `error ${error._tag}`
)
const live = api.live(listNotes, {})
live.subscribe(() => {
  const state = live.getSnapshot()
  if (state.status === "error") global.result.list = `error ${state.error?._tag}`
  if (state.status === "live") global.result.list = `live ${state.data?.length}`
})
