/**
 * The OpenFeature evaluation context ↔ fw's `Subject` (what targeting and rollout read):
 *
 * | evaluation context | Subject |
 * |---|---|
 * | `targetingKey` | `id` (absent: the anonymous caller, `type: 'anonymous'`, no rollout unit) |
 * | `tenantId` (string or null) | `tenantId` (absent: null) |
 * | `subjectType` (string) | `type` (absent: `'user'` with a `targetingKey`) |
 * | every other attribute | `metadata[name]` (rules compare strictly, so `'50'` is not `50`) |
 *
 * `scopes` play no part in flag evaluation and are not mapped.
 */
import type { Subject } from "../kernel/Subject.js"

/** The attributes the mapping reads (plus `targetingKey`); every other one is metadata. */
export const reserved = new Set(["targetingKey", "tenantId", "subjectType"])

/** An attribute the mapping cannot read: its name and why. */
export interface Invalid {
  readonly invalid: string
}

/** An OpenFeature evaluation context as the mapping reads it (the SDKs' type is structurally this). */
export type Attributes = { readonly targetingKey?: string } & Readonly<Record<string, unknown>>

const hasOwn = Object.prototype.hasOwnProperty

/** The Subject an evaluation context stands for, or why it cannot be read. */
export const subjectOf = (context: Attributes): Subject | Invalid => {
  const targetingKey = context.targetingKey
  const tenantId = context.tenantId
  const subjectType = context.subjectType
  if (targetingKey !== undefined && typeof targetingKey !== "string") return { invalid: "targetingKey must be a string" }
  if (tenantId !== undefined && tenantId !== null && typeof tenantId !== "string") return { invalid: "tenantId must be a string or null" }
  if (subjectType !== undefined && typeof subjectType !== "string") return { invalid: "subjectType must be a string" }
  const metadata: Record<string, unknown> = {}
  for (const name in context) {
    if (hasOwn.call(context, name) && !reserved.has(name)) metadata[name] = context[name]
  }
  return {
    type: targetingKey === undefined ? "anonymous" : subjectType ?? "user",
    id: targetingKey ?? "anonymous",
    tenantId: tenantId ?? null,
    metadata,
    scopes: []
  }
}

/** True when `subjectOf` refused the context. */
export const isInvalid = (read: Subject | Invalid): read is Invalid => hasOwn.call(read, "invalid")

/** The value an evaluation context can carry (the SDKs' `EvaluationContextValue`). */
export type Value = null | boolean | string | number | Date | Array<Value> | { [key: string]: Value }

const isValue = (value: unknown): value is Value => {
  if (value === null || typeof value === "string" || typeof value === "number" || typeof value === "boolean" || value instanceof Date) return true
  if (Array.isArray(value)) return value.every(isValue)
  if (typeof value === "object") return Object.values(value).every(isValue)
  return false
}

/**
 * The evaluation context of a Subject (a handler's `ctx.subject`), the inverse of `subjectOf`:
 * metadata first, so a metadata entry named like a reserved attribute cannot replace it;
 * metadata values an evaluation context cannot carry (functions, undefined) are left out.
 */
export const fromSubject = (subject: Subject): { targetingKey?: string } & Record<string, Value> => {
  const context: { targetingKey?: string } & Record<string, Value> = {}
  for (const [name, value] of Object.entries(subject.metadata)) {
    if (!reserved.has(name) && isValue(value)) context[name] = value
  }
  if (subject.type !== "anonymous") {
    context.targetingKey = subject.id
    context.subjectType = subject.type
  }
  if (subject.tenantId !== null) context.tenantId = subject.tenantId
  return context
}
