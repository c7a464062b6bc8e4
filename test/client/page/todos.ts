/**
 * The browser page of the client tests: mounts the api named in `window.fwPage`, shows `whoami`
 * and the live todo list, and exposes `addTodo` and its state for the test to drive and read.
 */
import type { ClientError, LiveState } from "../../../src/client/index.js"
import { mount } from "../../../src/client/index.js"
import { addTodo, listTodos, whoami } from "../contracts.js"

interface PageConfig {
  readonly url: string
  /** When set, `authHeaders` returns it (read at call time, so a test may rotate it). */
  token?: string
}

interface PageState {
  authCalls: number
  whoami: string | undefined
  todos: LiveState<ReadonlyArray<{ readonly text: string }>> | undefined
  connection: string
  addTodo: (text: string) => Promise<string>
}

const global = globalThis as unknown as { fwPage: PageConfig; fwState: PageState }
const config = global.fwPage
const state: PageState = {
  authCalls: 0,
  whoami: undefined,
  todos: undefined,
  connection: "idle",
  addTodo: (text) => api.call(addTodo, { text }).then((todo) => todo.id, (error: ClientError) => `error ${error._tag}`)
}
global.fwState = state

const fw = mount({
  apis: {
    main: config.token === undefined
      ? { url: config.url }
      : {
        url: config.url,
        authHeaders: async () => {
          state.authCalls++
          return { authorization: `Bearer ${config.token}` }
        }
      }
  },
  reconnect: { initialDelayMs: 50, maxDelayMs: 500 }
})
const api = fw.apis.main

const list = document.createElement("ul")
list.id = "todos"
const status = document.createElement("p")
status.id = "status"
document.body.append(status, list)

const render = () => {
  const todos = api.live(listTodos, {}).getSnapshot()
  state.todos = todos
  state.connection = api.connectionState.getSnapshot().status
  const error = todos.error === undefined ? "" : ` ${todos.error._tag}${"status" in todos.error ? ` ${todos.error.status}` : ""}`
  status.textContent = `${state.connection} ${todos.status}${error}`
  list.replaceChildren(...(todos.data ?? []).map((todo) => {
    const item = document.createElement("li")
    item.textContent = todo.text
    return item
  }))
}
api.live(listTodos, {}).subscribe(render)
api.connectionState.subscribe(render)
api.call(whoami, {}).then(
  (me) => state.whoami = `${me.type}:${me.id}`,
  (error: ClientError) => state.whoami = `error ${error._tag}`
)
