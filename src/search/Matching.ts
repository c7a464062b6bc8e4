/**
 * Filter predicates and facet counting over documents, with the semantics of `SearchBackend.ts`
 * (shared by the memory backend and the sql backend's in-process steps).
 */
import type { Document, Filter, Scalar } from "./SearchBackend.js"
import { isoInstant, readPath } from "./SearchBackend.js"

const scalarEquals = (a: unknown, b: Scalar): boolean => a === b

/** The values a field contributes (each element of a list). */
const valuesOf = (value: unknown): ReadonlyArray<unknown> =>
  value === undefined || value === null ? [] : Array.isArray(value) ? value : [value]

const compare = (docValue: unknown, filterValue: Scalar): number | undefined => {
  if (typeof filterValue === "number") return typeof docValue === "number" ? docValue - filterValue : undefined
  const target = isoInstant(filterValue)
  if (target === undefined) return undefined
  const actual = isoInstant(docValue)
  return actual === undefined ? undefined : actual - target
}

/** A predicate for one filter. */
export const predicate = (filter: Filter): (doc: Document) => boolean => {
  const { field, op } = filter
  const list = Array.isArray(filter.value) ? filter.value as ReadonlyArray<Scalar> : [filter.value as Scalar]
  const one = list[0]!
  const anyIn = (doc: Document) => valuesOf(readPath(doc, field)).some((v) => list.some((target) => scalarEquals(v, target)))
  switch (op) {
    case "eq":
    case "in":
      return anyIn
    case "neq":
    case "nin":
      return (doc) => !anyIn(doc)
    default: {
      const test = op === "gt"
        ? (c: number) => c > 0
        : op === "gte"
        ? (c: number) => c >= 0
        : op === "lt"
        ? (c: number) => c < 0
        : (c: number) => c <= 0
      return (doc) =>
        valuesOf(readPath(doc, field)).some((v) => {
          const c = compare(v, one)
          return c !== undefined && test(c)
        })
    }
  }
}

/** One predicate for all filters (ANDed). */
export const predicateAll = (filters: ReadonlyArray<Filter>): (doc: Document) => boolean => {
  const predicates = filters.map(predicate)
  return (doc) => {
    for (const p of predicates) if (!p(doc)) return false
    return true
  }
}

/** The facet key of a value: strings as is, numbers and booleans as JSON text; other values are not counted. */
export const facetKey = (value: unknown): string | undefined =>
  typeof value === "string" ? value : typeof value === "number" || typeof value === "boolean" ? JSON.stringify(value) : undefined

/** Counts facet values over documents. */
export const countFacets = (
  fields: ReadonlyArray<string>,
  docs: Iterable<Document>
): Record<string, Record<string, number>> => {
  // Maps, then own keys: a field or value such as "__proto__" is a key like any other.
  const counts = new Map<string, Map<string, number>>(fields.map((field) => [field, new Map()]))
  for (const doc of docs) {
    for (const field of fields) {
      const map = counts.get(field)!
      for (const value of valuesOf(readPath(doc, field))) {
        const key = facetKey(value)
        if (key !== undefined) map.set(key, (map.get(key) ?? 0) + 1)
      }
    }
  }
  return Object.fromEntries([...counts].map(([field, map]) => [field, Object.fromEntries(map)]))
}

/** Adds one document to running facet counts (maps per field). */
export const addFacets = (fields: ReadonlyArray<string>, maps: ReadonlyArray<Map<string, number>>, doc: Document): void => {
  for (let i = 0; i < fields.length; i++) {
    const map = maps[i]!
    for (const value of valuesOf(readPath(doc, fields[i]!))) {
      const key = facetKey(value)
      if (key !== undefined) map.set(key, (map.get(key) ?? 0) + 1)
    }
  }
}
