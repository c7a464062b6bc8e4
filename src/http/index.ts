/**
 * `@fw/framework/http`: REST routes, their pipeline, projections of procedures, idempotency and body caps.
 */
export * as BodyLimit from "./BodyLimit.js"
export * as Idempotency from "./Idempotency.js"
export * as Projection from "./Projection.js"
export * as RestRoute from "./RestRoute.js"
export { defineRestRoute } from "./RestRoute.js"
export { IdempotencyRecords } from "./tables.js"
export * as Sse from "./Sse.js"
export { sse, sseFrame } from "./Sse.js"
export * as Bytes from "./Bytes.js"
export { bytes } from "./Bytes.js"
