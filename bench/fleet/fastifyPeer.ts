/**
 * One process of the fleet benchmark's Fastify peer: what a user would write instead of an fw
 * fleet. `POST /rpc` takes the same rpc request frame as the fw app's `docs.create` (its body
 * checked by a Fastify JSON schema), inserts the row over a `pg.Pool` of 12 (the replicas' pool
 * size) and announces it with `pg_notify` on the `docs` channel, the row in the payload, then
 * answers the rpc `Exit` frame. Every process LISTENs on a connection of its own and records each
 * notification it hears, its own included, on `GET /_events` in the fleet harness app's shape
 * (`remote` when another process wrote it), so the benchmark waits for every process to hear every
 * write as it does for the replicas.
 *
 * `FW_PEER_NOTIFY` picks where the NOTIFY goes: `after` (default) sends it as a statement of its
 * own once the insert has committed (a crash in between loses the announcement); `inside` sends
 * it in the insert's transaction, as a trigger would (announced if and only if committed), and
 * PostgreSQL then commits such transactions one at a time, each with its WAL flush.
 *
 * Environment: `DATABASE_URL` (required), `FW_REPLICA` (its name, in the payload). Prints
 * `PORT <n>` once listening (the LISTEN confirmed before); `POST /_rest` closes the pool's
 * connections between the benchmark's runs.
 */
import Fastify from "fastify"
import pg from "pg"

const url = process.env.DATABASE_URL
if (url === undefined) throw new Error("DATABASE_URL is required")
const origin = process.env.FW_REPLICA ?? "peer"
const inside = process.env.FW_PEER_NOTIFY === "inside"

interface Frame {
  readonly id: string
  readonly payload: { readonly id: string; readonly title: string }
}

/** The rpc request frame of `docs.create`, as the fw procedure's input schema takes it. */
const frameSchema = {
  type: "object",
  required: ["_tag", "id", "tag", "payload"],
  properties: {
    _tag: { const: "Request" },
    id: { type: "string" },
    tag: { const: "docs.create" },
    payload: {
      type: "object",
      required: ["id", "title"],
      properties: { id: { type: "string" }, title: { type: "string" } }
    }
  }
} as const

const received: Array<{ readonly id: string; readonly title: string; readonly remote: boolean; readonly at: number; readonly receivedAt: number }> = []
const listener = new pg.Client({ connectionString: url, application_name: `${origin}-listen` })
await listener.connect()
listener.on("notification", (message) => {
  if (message.channel !== "docs" || message.payload === undefined) return
  const change = JSON.parse(message.payload) as { readonly id: string; readonly title: string; readonly at: number; readonly origin: string }
  received.push({ id: change.id, title: change.title, remote: change.origin !== origin, at: change.at, receivedAt: Date.now() })
})
await listener.query("LISTEN docs")

const makePool = () => new pg.Pool({ connectionString: url, max: 12, application_name: origin })
let pool = makePool()
const insertSql = "INSERT INTO docs (id, title) VALUES ($1, $2)"
const notifySql = "SELECT pg_notify('docs', $1)"

/** Inserts the row and announces it, the NOTIFY after the commit or inside the transaction. */
const write = async (id: string, title: string) => {
  const payload = JSON.stringify({ id, title, at: Date.now(), origin })
  if (!inside) {
    await pool.query(insertSql, [id, title])
    await pool.query(notifySql, [payload])
    return
  }
  const client = await pool.connect()
  try {
    await client.query("BEGIN")
    await client.query(insertSql, [id, title])
    await client.query(notifySql, [payload])
    await client.query("COMMIT")
    client.release()
  } catch (error) {
    // A connection in an unknown state is closed, not handed back.
    await client.query("ROLLBACK").then(() => client.release(), () => client.release(true))
    throw error
  }
}

const app = Fastify()
app.post<{ Body: Frame }>("/rpc", { schema: { body: frameSchema } }, async (request, reply) => {
  const { id, payload } = request.body
  try {
    await write(payload.id, payload.title)
  } catch (error) {
    if ((error as { readonly code?: unknown }).code === "23505") return reply.code(409).send({ error: "DuplicateRow" })
    throw error
  }
  return reply.type("application/json").send(JSON.stringify([{ _tag: "Exit", requestId: id, exit: { _tag: "Success", value: { id: payload.id } } }]))
})
app.get("/_events", async () => received)
// The replicas' statement counts (`GET /_queries`): none kept here.
app.get("/_queries", async () => ({}))
app.get("/_fw/health", async () => ({ ok: true }))
// The bench's housekeeping once it has read the server's CPU: the pool's connections closed, opened
// again by the next write (the shared server allows 100 connections; the pool would hold its 12
// for ten seconds after each run, beside every other peer's).
app.post("/_rest", async () => {
  const resting = pool
  pool = makePool()
  await resting.end()
  return { ok: true }
})
await app.listen({ port: 0, host: "127.0.0.1" })
const address = app.server.address()
if (address !== null && typeof address === "object") console.log(`PORT ${address.port}`)
// A clean exit on SIGTERM, so that `--cpu-prof` writes its profile.
process.on("SIGTERM", () => void app.close().then(() => Promise.all([pool.end(), listener.end()])).then(() => process.exit(0)))
