/**
 * A plain HTTP server for a bundled test page on an origin of its own: `/page.js` is the bundle,
 * every other path the page that loads it.
 */
import { HttpLayerRouter, HttpServerResponse } from "@effect/platform"
import { Effect, Layer } from "effect"
import type { Scope } from "effect"
import { createServer } from "node:http"

/** The html of a page that loads `/page.js` as a module. */
export const pageHtml = `<!doctype html><html><body><script type="module" src="/page.js"></script></body></html>`

/** `GET /page` and `GET /page.js` (the bundled test page `code`) as routes on an app's own listener. */
export const routes = (code: string) =>
  Layer.mergeAll(
    HttpLayerRouter.add("GET", "/page", HttpServerResponse.html(pageHtml)),
    HttpLayerRouter.add("GET", "/page.js", HttpServerResponse.text(code, { contentType: "text/javascript" }))
  )

/** Serves `code` as `/page.js` and `html` elsewhere on a free loopback port, closed with the scope. */
export const serve = (code: string, html: string = pageHtml): Effect.Effect<{ readonly url: string }, never, Scope.Scope> =>
  Effect.acquireRelease(
    Effect.async<{ readonly url: string; readonly close: () => void }>((resume) => {
      const server = createServer((request, response) => {
        const script = request.url === "/page.js"
        response.writeHead(200, { "content-type": script ? "text/javascript" : "text/html" })
        response.end(script ? code : html)
      })
      server.listen(0, "127.0.0.1", () => {
        const address = server.address()
        const port = typeof address === "object" && address !== null ? address.port : 0
        resume(Effect.succeed({ url: `http://127.0.0.1:${port}`, close: () => server.close() }))
      })
    }),
    (server) => Effect.sync(server.close)
  )
