/**
 * A `node:http` server for `NodeHttpServer.layer` that answers while the app is still booting.
 *
 * `NodeHttpServer.layer` listens as soon as its layer is built, but attaches its request handler
 * only once every route layer (store, plugins, schedulers) is built. A request arriving in that
 * gap meets a server with no `"request"` listener, which Node never answers: the caller hangs
 * (until its own timeout, 300 s for `fetch`). This server answers such requests `503` with
 * `Retry-After: 1` in the house error shape, and steps aside when the real handler is attached.
 */
import * as Http from "node:http"

const bootingBody = JSON.stringify({ _tag: "ServerStarting", message: "the server is starting: retry shortly" })

const booting = (_request: Http.IncomingMessage, response: Http.ServerResponse) => {
  response.writeHead(503, {
    "content-type": "application/json",
    "content-length": Buffer.byteLength(bootingBody),
    "retry-after": "1"
  })
  response.end(bootingBody)
}

/** Use in place of `node:http`'s `createServer`: `NodeServer.layer(BootServer.createServer, {port})` (or `NodeHttpServer.layer`). */
export const createServer = (): Http.Server => {
  const server = Http.createServer(booting)
  const stepAside = (event: string | symbol) => {
    if (event !== "request") return
    server.off("request", booting)
    server.off("newListener", stepAside)
  }
  server.on("newListener", stepAside)
  return server
}
