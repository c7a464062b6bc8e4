/**
 * `FwProvider` wiring, rendered to a string in Node (no socket is opened: a server render never
 * subscribes): a hook with neither a provider nor an api fails the render with one clear line; under
 * the provider, the spec's forms read its api and start from their empty values.
 */
import { assert, describe, it } from "@effect/vitest"
import { createElement as h } from "react"
import { renderToString } from "react-dom/server"
import { WebSocket } from "ws"
import type { SocketConstructor } from "../../src/client/index.js"
import { mount } from "../../src/client/index.js"
import {
  FwProvider,
  useConnection,
  useFlag,
  useFlags,
  useFlagValue,
  useMutation,
  useQuery,
  useSearch,
  useVariant,
  useVariants
} from "../../src/react/index.js"
import { addTodo, listTodos, Theme } from "./contracts.js"

const Flags = () => {
  const flags = useFlags()
  const variants = useVariants()
  const search = useSearch("notes")
  const variant = useVariant("theme")
  return h(
    "p",
    null,
    `${Object.keys(flags).length} ${Object.keys(variants).length} ${useFlag("beta")} ${variant === undefined} ${useFlagValue(Theme).accent} ${search.results.length} ${search.pending}`
  )
}

/** The call hooks' provider forms. */
const Calls = () => {
  const todos = useQuery(listTodos, {})
  const add = useMutation(addTodo)
  return h("p", null, `${useConnection().status} ${todos.status} ${add.status}`)
}

describe("FwProvider", () => {
  it("a hook with no provider and no api fails the render, saying how to give it one", () => {
    assert.throws(() => renderToString(h(Flags)), /no api for this hook: render it under <FwProvider api=\{\.\.\.\}>, or pass the api as the first argument/)
  })

  it("under the provider, the spec's forms read its api: empty sets, false, undefined, the typed default, no results; the call hooks too", () => {
    const fw = mount({ apis: { main: { url: "ws://127.0.0.1:9/rpc" } }, WebSocket: WebSocket as unknown as SocketConstructor })
    try {
      assert.strictEqual(renderToString(h(FwProvider, { api: fw.apis.main }, h(Flags))), "<p>0 0 false true grey 0 false</p>")
      assert.strictEqual(renderToString(h(FwProvider, { api: fw.apis.main }, h(Calls))), "<p>idle connecting idle</p>")
    } finally {
      fw.dispose()
    }
  })
})
