/**
 * The React test page: a live todo list with an add form, over `@fw/framework/react`.
 */
import { createElement as h, useState } from "react"
import { createRoot } from "react-dom/client"
import { mount } from "../../../src/client/index.js"
import { useConnection, useMutation, useQuery } from "../../../src/react/index.js"
import { addTodo, listTodos } from "../contracts.js"

const config = (globalThis as unknown as { fwPage: { url: string; token?: string } }).fwPage
const fw = mount({
  apis: {
    main: {
      url: config.url,
      authHeaders: async () => config.token === undefined ? {} : { authorization: `Bearer ${config.token}` }
    }
  }
})
const api = fw.apis.main

const Todos = () => {
  const todos = useQuery(api, listTodos, {})
  const add = useMutation(api, addTodo)
  const connection = useConnection(api)
  const [text, setText] = useState("")
  return h(
    "main",
    null,
    h("p", { id: "status" }, `${connection.status} ${todos.status}${add.error ? ` ${add.error._tag}` : ""}`),
    h("input", { id: "text", value: text, onChange: (event: { target: { value: string } }) => setText(event.target.value) }),
    h("button", { id: "add", disabled: add.status === "pending", onClick: () => add.mutate({ text }) }, "add"),
    h("ul", { id: "todos" }, ...(todos.data ?? []).map((todo) => h("li", { key: todo.id }, todo.text)))
  )
}

const root = document.createElement("div")
document.body.append(root)
createRoot(root).render(h(Todos))
