/** A page that uses only `mount` (what most browser apps import), to measure its bundle. */
import { mount } from "../../../src/client/index.js"
import { listTodos } from "../contracts.js"

const fw = mount({ apis: { main: { url: "/rpc" } } })
fw.apis.main.live(listTodos, {}).subscribe(() => undefined)
