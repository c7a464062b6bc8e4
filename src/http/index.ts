/**
 * `@fw/framework/http`: REST routes on the rpc listener — `defineRestRoute`, SSE (`sse`,
 * `sseFrame`), binary answers (`bytes`), idempotency records, rate limits, and the mounting of an app's routes
 * and projected procedures.
 */
export * as Bytes from "./Bytes.js"
export { bytes } from "./Bytes.js"
export * as BodyLimit from "./BodyLimit.js"
export * as ETag from "./ETag.js"
export * as Http from "./Http.js"
export * as Idempotency from "./Idempotency.js"
export * as IdempotencyStore from "./IdempotencyStore.js"
export * as OpenApiDocument from "./OpenApiDocument.js"
export * as Projection from "./Projection.js"
export * as QueryInput from "./QueryInput.js"
export * as RateLimit from "./RateLimit.js"
export * as RateLimitStore from "./RateLimitStore.js"
export * as ResponseControl from "./ResponseControl.js"
export * as RestRoute from "./RestRoute.js"
export { defineRestRoute } from "./RestRoute.js"
export * as Sse from "./Sse.js"
export { sse, sseFrame } from "./Sse.js"
export { IdempotencyRecords, RateLimitCounters } from "../app/tables.js"
