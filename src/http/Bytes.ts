/**
 * Binary answers of REST handlers: `bytes(...)`. The shape is shared with plugin HTTP routes, so it
 * lives in `app/ByteStream`; this module is its name in the REST area.
 */
export * from "../app/ByteStream.js"
