/** The Fastify peer of the REST benchmark: the same route (bearer check, params check, scope, ETag). Prints its port. */
import Fastify from "fastify"
import { createHash } from "node:crypto"

const scopes = ["items:read"]
const app = Fastify()
app.get<{ Params: { id: string } }>("/items/:id", async (request, reply) => {
  const token = /^Bearer\s+(.+)$/i.exec(request.headers.authorization ?? "")?.[1]
  if (token !== "bench" || !scopes.includes("items:read")) return reply.code(403).send()
  if (request.params.id.length < 1) return reply.code(400).send()
  const body = JSON.stringify({ id: request.params.id, name: `item ${request.params.id}`, price: 3 })
  const etag = `W/"${createHash("sha1").update(body).digest("hex")}"`
  if (request.headers["if-none-match"] === etag) return reply.code(304).header("etag", etag).send()
  return reply.header("etag", etag).type("application/json").send(body)
})
await app.listen({ port: 0, host: "127.0.0.1" })
const address = app.server.address()
if (address !== null && typeof address === "object") console.log(`PORT ${address.port}`)
// Exit normally on the harness's SIGINT, so `--cpu-prof` writes its profile.
process.on("SIGINT", () => process.exit(0))
