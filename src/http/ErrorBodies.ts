/**
 * The JSON bodies of fw's error answers, as the OpenAPI documents describe them. Over HTTP every
 * typed error answers `{_tag, message}` (`HttpResponses`), whatever fields the error class has:
 * these schemas are that body per tag, not the classes (an `Unauthenticated` carries `reason` on
 * the wire of the rpc envelope, but its HTTP body is `{_tag, message}`).
 *
 * `byStatus` is the error table of docs/errors.md for a procedure called as plain JSON.
 */
import { HttpApiSchema } from "@effect/platform"
import { Option, Schema, SchemaAST } from "effect"

/** The body of the error `tag`, described by `description`. */
const body = <const Tag extends string, Fields extends Schema.Struct.Fields = {}>(
  tag: Tag,
  description: string,
  fields?: Fields
) =>
  Schema.Struct({ _tag: Schema.Literal(tag), message: Schema.String, ...(fields ?? ({} as Fields)) })
    .annotations({ identifier: tag, title: tag, description })

/** `400 InputInvalid`. */
export const InputInvalid = body("InputInvalid", "The input does not match the schema (the message says where), or the body is not JSON.")
/** `400 RowInvalid`. */
export const RowInvalid = body("RowInvalid", "A row or a `where` value cannot be stored (wrong type, non-finite number, NUL...).")
/** `400 UnknownField`. */
export const UnknownField = body("UnknownField", "A `where`, `orderBy` or patch names a field the table does not have.")
/** `400 BodyReadFailed`. */
export const BodyReadFailed = body("BodyReadFailed", "The request body could not be read to its end.")
/** `401 Unauthenticated`. */
export const Unauthenticated = body("Unauthenticated", "A strategy refused the caller's credentials (a bad or expired token or session).")
/** `GuardRefused`, with the guard's status. */
export const GuardRefused = body("GuardRefused", "A guard refused the caller: `requireAuthenticated` answers 401, `requireScope` 403.")
/** `403 FlagDisabled`. */
export const FlagDisabled = body("FlagDisabled", "A feature flag gating the call is off for the caller.")
/** `403 CrossSiteRequest`. */
export const CrossSiteRequest = body(
  "CrossSiteRequest",
  "A request from another origin would have been authenticated by its cookies alone."
)
/** `403 TenantViolation`. */
export const TenantViolation = body("TenantViolation", "A write tried to place a row in another tenant.")
/** `403 StoreWriteDenied`. */
export const StoreWriteDenied = body("StoreWriteDenied", "The call may only read (another site's link), or its plugin may not write.")
/** `404 RowNotFound`. */
export const RowNotFound = body("RowNotFound", "An update or delete of a row the caller cannot see.")
/** `409 DuplicateRow`. */
export const DuplicateRow = body("DuplicateRow", "An insert with an id that already exists.")
/** `413 PayloadTooLarge`. */
export const PayloadTooLarge = body("PayloadTooLarge", "The body is larger than the cap (`limit` bytes).", { limit: Schema.Number })
/** `415 UnsupportedMediaType`. */
export const UnsupportedMediaType = body("UnsupportedMediaType", "The body is not `application/json`.")
/** `500 InternalError`. */
export const InternalError = body(
  "InternalError",
  "Anything unexpected: quote the trace id; the cause is in the server log under it.",
  { traceId: Schema.optional(Schema.String) }
)
/** `500 CommitUnknown`. */
export const CommitUnknown = body(
  "CommitUnknown",
  "The connection died while the write was committing: read back before retrying."
)
/** `500 ChangeDeliveryFailed` (no longer produced; kept so older answers decode). */
export const ChangeDeliveryFailed = body("ChangeDeliveryFailed", "No longer produced: a committed write answers success.")
/** `503 StoreUnavailable`. */
export const StoreUnavailable = body("StoreUnavailable", "The database could not be reached or refused the write: nothing was written; retry later.")
/** A handler's own refusal, with the status it chose. */
export const ProcedureFailure = body("ProcedureFailure", "The handler refused with a status of its choosing and this message.")

/**
 * `body` as the answer at `status`, for `HttpApiEndpoint.addError`. Its identifier is restated with
 * the status: annotating a struct again drops it, and the document would inline the body at every
 * use instead of referring to one component.
 */
export const at = (body: Schema.Schema.AnyNoContext, status: number): Schema.Schema.AnyNoContext => {
  const identifier = SchemaAST.getIdentifierAnnotation(body.ast)
  return body.annotations({
    ...HttpApiSchema.annotations({ status }),
    ...(Option.isSome(identifier) ? { identifier: identifier.value } : {})
  })
}

/** A status of the table: what it means, and the bodies that answer it. */
export interface Status {
  readonly description: string
  readonly bodies: ReadonlyArray<Schema.Schema.AnyNoContext>
}

/**
 * The statuses a procedure called as plain JSON (`POST /rpc/<tag>`) may answer, each with its
 * bodies. `ProcedureFailure` may come with any status: the handler chooses it.
 */
export const byStatus: ReadonlyMap<number, Status> = new Map<number, Status>([
  [400, { description: "The input or a value to store is invalid.", bodies: [InputInvalid, RowInvalid, UnknownField, BodyReadFailed] }],
  [401, { description: "The caller's credentials were refused, or a guard requires a signed-in caller.", bodies: [Unauthenticated, GuardRefused] }],
  [403, {
    description: "A guard or a flag refused the caller, or the request was refused as cross-site.",
    bodies: [GuardRefused, FlagDisabled, CrossSiteRequest, TenantViolation, StoreWriteDenied]
  }],
  [404, { description: "A row the call updates or deletes is not the caller's to see.", bodies: [RowNotFound] }],
  [409, { description: "A row with that id already exists.", bodies: [DuplicateRow] }],
  [413, { description: "The body is larger than the cap.", bodies: [PayloadTooLarge] }],
  [415, { description: "The body is not JSON.", bodies: [UnsupportedMediaType] }],
  [500, { description: "An unexpected failure (quote the trace id), or a commit whose outcome is unknown.", bodies: [InternalError, CommitUnknown, ChangeDeliveryFailed] }],
  [503, { description: "The database is unavailable: nothing was written; retry later.", bodies: [StoreUnavailable] }]
])
