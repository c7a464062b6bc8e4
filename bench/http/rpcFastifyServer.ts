/**
 * The Fastify peer of the rpc benchmark: `POST /rpc` doing the work fw's `POST /rpc` does for the
 * `items.get` query: parse the rpc request frame, check the bearer token and the scope (the
 * query's guard), validate the input, read the row (the caller's tenant only), answer the rpc
 * `Exit` frame; and the same call as plain JSON on `POST /rpc/items.get`. Prints its port.
 */
import Fastify from "fastify"

interface Frame {
  readonly _tag: string
  readonly id: string
  readonly tag: string
  readonly payload: { readonly id?: unknown }
  readonly headers: ReadonlyArray<readonly [string, string]>
}

const rows = new Map([["i1", { id: "i1", tenantId: "t1", name: "apple", price: 3 }]])
const caller = { tenantId: "t1", scopes: ["items:read"] }
const app = Fastify()
app.post<{ Body: Frame }>("/rpc", async (request, reply) => {
  const frame = request.body
  if (frame?._tag !== "Request" || frame.tag !== "items.get") return reply.code(400).send()
  if (request.headers.authorization !== "Bearer bench") return reply.code(401).send()
  if (!caller.scopes.includes("items:read")) return reply.code(403).send()
  if (typeof frame.payload?.id !== "string") return reply.code(400).send()
  const row = rows.get(frame.payload.id)
  const value = row !== undefined && row.tenantId === caller.tenantId ? row : null
  return reply.type("application/json").send(JSON.stringify([{ _tag: "Exit", requestId: frame.id, exit: { _tag: "Success", value } }]))
})
// The plain-JSON form (`POST /rpc/<tag>`): the input is the body, the value is the answer.
app.post<{ Body: { readonly id?: unknown } }>("/rpc/items.get", async (request, reply) => {
  if (request.headers.authorization !== "Bearer bench") return reply.code(401).send()
  if (!caller.scopes.includes("items:read")) return reply.code(403).send()
  if (typeof request.body?.id !== "string") return reply.code(400).send()
  const row = rows.get(request.body.id)
  const value = row !== undefined && row.tenantId === caller.tenantId ? row : null
  return reply.type("application/json").send(JSON.stringify(value))
})
await app.listen({ port: 0, host: "127.0.0.1" })
const address = app.server.address()
if (address !== null && typeof address === "object") console.log(`PORT ${address.port}`)
