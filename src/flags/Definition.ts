/**
 * Flag definitions (spec 2.11): a boolean kill-switch or an object with `enabled`, `rollout`,
 * `rolloutBy`, `targeting`, `variants`, `offVariant`, `schedule` and `description`, checked at
 * construction and resolved into the shape the evaluator reads.
 */
import { Either } from "effect"
import * as IsoInstant from "../kernel/schema/IsoInstant.js"
import type { Subject } from "../kernel/Subject.js"
import { FlagDefinitionError } from "./Errors.js"

/** A JSON value a variant may carry. */
export type Json = string | number | boolean | null | ReadonlyArray<Json> | { readonly [key: string]: Json }

/** A metadata value a targeting rule compares strictly (`'50'` is not `50`). */
export type MetadataValue = string | number | boolean | null

/**
 * One targeting rule: its keys are ANDed. A key with an empty list matches no one; a rule `{}`
 * matches everyone. Ids compare as exact strings (no case folding, no Unicode normalisation).
 */
export interface Rule {
  readonly subjectIds?: ReadonlyArray<string>
  readonly tenantIds?: ReadonlyArray<string>
  readonly subjectTypes?: ReadonlyArray<string>
  readonly metadata?: Readonly<Record<string, MetadataValue>>
}

/** A variant: `value` is any JSON; an omitted weight is 1 (so all omitted is an even split). */
export interface Variant<A = Json> {
  readonly name: string
  readonly value: A
  readonly weight?: number
}

/** An instant: epoch milliseconds or an ISO-8601 string. */
export type Instant = number | string

/** A ramp: the rollout grows linearly from `from` % at `startAt` to `to` % at `endAt`. */
export interface Ramp {
  readonly from: number
  readonly to: number
  readonly startAt: Instant
  readonly endAt: Instant
}

/** When a flag is live: off before `activateAt`, off at or after `deactivateAt`; a ramp replaces the static rollout. */
export interface Schedule {
  readonly activateAt?: Instant
  readonly deactivateAt?: Instant
  readonly ramp?: Ramp
}

/** An object flag. Without `enabled` it is enabled; without `rollout` it is on for everyone. */
export interface FlagObject<A = Json> {
  readonly enabled?: boolean
  readonly rollout?: number
  readonly rolloutBy?: "tenant" | "subject"
  /** OR of rules; absent or `[]` means no restriction. */
  readonly targeting?: ReadonlyArray<Rule>
  readonly variants?: ReadonlyArray<Variant<A>>
  /** The variant served when the flag evaluates off; boolean resolution treats it as off. */
  readonly offVariant?: string
  readonly schedule?: Schedule
  readonly description?: string
}

/** A flag: a boolean kill-switch, or an object. */
export type Flag = boolean | FlagObject

/** A definition after checks: instants in epoch ms, weights filled in. */
export interface Resolved {
  readonly key: string
  readonly enabled: boolean
  readonly rollout: number
  readonly rolloutBy: "tenant" | "subject"
  readonly targeting: ReadonlyArray<Rule>
  readonly variants: ReadonlyArray<{ readonly name: string; readonly value: unknown; readonly weight: number }>
  readonly totalWeight: number
  readonly offVariant: string | undefined
  readonly activateAt: number | undefined
  readonly deactivateAt: number | undefined
  readonly ramp: { readonly from: number; readonly to: number; readonly startAt: number; readonly endAt: number } | undefined
  readonly description: string | undefined
  /** True for a boolean flag (its variant is the synthetic `on`/`off`). */
  readonly boolean: boolean
  /** True when the answer depends on the time (a schedule or a ramp). */
  readonly timed: boolean
  /** The targeting rules compiled to predicates (id lists as sets), in declaration order. */
  readonly matchers: ReadonlyArray<Matcher>
}

const hasOwn = Object.prototype.hasOwnProperty

/** A compiled targeting check. */
export type Matcher = (subject: Subject) => boolean

/** The matcher of a rule `{}` (everyone); compilers recognise it by identity. */
export const matchesEveryone: Matcher = () => true

/** The matcher of a rule with an empty list (no one); compilers recognise it by identity. */
export const matchesNoOne: Matcher = () => false

/** Membership of a list: a comparison for one value, a set beyond. */
const member = (values: ReadonlyArray<string>, read: (subject: Subject) => string | null): Matcher => {
  if (values.length === 0) return matchesNoOne
  if (values.length === 1) {
    const only = values[0]!
    return (subject) => read(subject) === only
  }
  const set = new Set(values)
  return (subject) => {
    const value = read(subject)
    return value !== null && set.has(value)
  }
}

const readId = (subject: Subject) => subject.id
const readTenant = (subject: Subject) => subject.tenantId
const readType = (subject: Subject) => subject.type

/** One metadata key: an own property holding exactly `value` (strict comparison). */
const metadataIs = (name: string, value: MetadataValue): Matcher => (subject) => {
  const metadata = subject.metadata
  return metadata[name] === value && hasOwn.call(metadata, name)
}

/** ANDs checks, with no loop for the usual one or two. */
const allOf = (checks: ReadonlyArray<Matcher>): Matcher => {
  if (checks.includes(matchesNoOne)) return matchesNoOne
  if (checks.length === 0) return matchesEveryone
  if (checks.length === 1) return checks[0]!
  if (checks.length === 2) {
    const [first, second] = checks as readonly [Matcher, Matcher]
    return (subject) => first(subject) && second(subject)
  }
  return (subject) => {
    for (let i = 0; i < checks.length; i++) if (!checks[i]!(subject)) return false
    return true
  }
}

/**
 * Compiles a rule once: every key it names must hold; a key with an empty list matches no one
 * (`matchesNoOne`), a rule `{}` matches everyone (`matchesEveryone`). Id lists become one
 * comparison or a set, each metadata key its own check.
 */
export const compileRule = (rule: Rule): Matcher => {
  const checks: Array<Matcher> = []
  if (rule.subjectIds !== undefined) checks.push(member(rule.subjectIds, readId))
  if (rule.tenantIds !== undefined) checks.push(member(rule.tenantIds, readTenant))
  if (rule.subjectTypes !== undefined) checks.push(member(rule.subjectTypes, readType))
  if (rule.metadata !== undefined) {
    for (const [name, value] of Object.entries(rule.metadata)) checks.push(metadataIs(name, value))
  }
  return allOf(checks)
}

const flagFields = new Set(["enabled", "rollout", "rolloutBy", "targeting", "variants", "offVariant", "schedule", "description"])
const ruleKeys = new Set(["subjectIds", "tenantIds", "subjectTypes", "metadata"])

/** Why an ISO string is refused as a schedule instant. */
const refusals: Readonly<Record<IsoInstant.Refusal, string>> = {
  "not-iso": "must be epoch milliseconds or an ISO-8601 string",
  // Date.parse would read a zone-less date-time in each process's local zone: replicas would switch the flag at different instants.
  "zone-missing": "must be epoch milliseconds or an ISO-8601 string with a time zone (Z or an offset such as +02:00): without one it would be read in each server's local zone",
  "no-such-time": "must be epoch milliseconds or an ISO-8601 string naming a day and time that exist"
}

/**
 * The epoch ms of an ISO-8601 string, strictly (`IsoInstant.parse`): a date alone is UTC midnight;
 * a date-time must carry its zone; a day or time that does not exist is refused. Left: why.
 */
const isoMillis = (text: string): number | string =>
  Either.match(IsoInstant.parse(text, "refuse"), { onLeft: (refusal) => refusals[refusal], onRight: (ms) => ms })

/** Parses an instant (epoch ms or ISO string, see `isoMillis`) or throws with `what` in the message. */
export const instant = (key: string, what: string, value: unknown): number => {
  if (typeof value === "number" && Number.isFinite(value)) return value
  const parsed = typeof value === "string" ? isoMillis(value) : "must be epoch milliseconds or an ISO-8601 string"
  if (typeof parsed === "number") return parsed
  throw new FlagDefinitionError(`flag "${key}": ${what} ${parsed}, got ${JSON.stringify(value)}`)
}

const percentage = (key: string, what: string, value: unknown): number => {
  if (typeof value !== "number" || !Number.isFinite(value) || value < 0 || value > 100) {
    throw new FlagDefinitionError(`flag "${key}": ${what} must be a number from 0 to 100, got ${JSON.stringify(value)}`)
  }
  return value
}

const stringList = (key: string, what: string, value: unknown): ReadonlyArray<string> => {
  if (!Array.isArray(value) || !value.every((item) => typeof item === "string")) {
    throw new FlagDefinitionError(`flag "${key}": ${what} must be a list of strings`)
  }
  return value
}

const isRecord = (value: unknown): value is Record<string, unknown> =>
  typeof value === "object" && value !== null && !Array.isArray(value)

const checkRule = (key: string, index: number, rule: unknown): Rule => {
  const at = `targeting[${index}]`
  if (!isRecord(rule)) throw new FlagDefinitionError(`flag "${key}": ${at} must be an object`)
  for (const name of Object.keys(rule)) {
    if (!ruleKeys.has(name)) {
      throw new FlagDefinitionError(`flag "${key}": ${at} has an unknown key "${name}" (known: subjectIds, tenantIds, subjectTypes, metadata)`)
    }
  }
  const out: { -readonly [K in keyof Rule]: Rule[K] } = {}
  if (rule.subjectIds !== undefined) out.subjectIds = stringList(key, `${at}.subjectIds`, rule.subjectIds)
  if (rule.tenantIds !== undefined) out.tenantIds = stringList(key, `${at}.tenantIds`, rule.tenantIds)
  if (rule.subjectTypes !== undefined) out.subjectTypes = stringList(key, `${at}.subjectTypes`, rule.subjectTypes)
  if (rule.metadata !== undefined) {
    if (!isRecord(rule.metadata)) throw new FlagDefinitionError(`flag "${key}": ${at}.metadata must be an object`)
    for (const [name, value] of Object.entries(rule.metadata)) {
      const ok = value === null || typeof value === "string" || typeof value === "boolean" ||
        (typeof value === "number" && Number.isFinite(value))
      if (!ok) {
        throw new FlagDefinitionError(`flag "${key}": ${at}.metadata.${name} must be a string, finite number, boolean or null (compared strictly)`)
      }
    }
    out.metadata = rule.metadata as Record<string, MetadataValue>
  }
  return out
}

/**
 * Checks a flag and resolves it. Throws `FlagDefinitionError` with the flag key and the field at fault.
 */
export const resolve = (key: string, flag: unknown): Resolved => {
  if (typeof key !== "string" || key.length === 0) throw new FlagDefinitionError("a flag key must be a non-empty string")
  if (typeof flag === "boolean") {
    return {
      key,
      enabled: flag,
      rollout: 100,
      rolloutBy: "subject",
      targeting: [],
      variants: [],
      totalWeight: 0,
      offVariant: undefined,
      activateAt: undefined,
      deactivateAt: undefined,
      ramp: undefined,
      description: undefined,
      boolean: true,
      timed: false,
      matchers: []
    }
  }
  if (!isRecord(flag)) throw new FlagDefinitionError(`flag "${key}" must be a boolean or an object`)
  for (const name of Object.keys(flag)) {
    if (!flagFields.has(name)) throw new FlagDefinitionError(`flag "${key}" has an unknown field "${name}"`)
  }
  if (flag.enabled !== undefined && typeof flag.enabled !== "boolean") {
    throw new FlagDefinitionError(`flag "${key}": enabled must be a boolean`)
  }
  const rollout = flag.rollout === undefined ? 100 : percentage(key, "rollout", flag.rollout)
  if (flag.rolloutBy !== undefined && flag.rolloutBy !== "tenant" && flag.rolloutBy !== "subject") {
    throw new FlagDefinitionError(`flag "${key}": rolloutBy must be "tenant" (or "subject", the default)`)
  }
  if (flag.targeting !== undefined && !Array.isArray(flag.targeting)) {
    throw new FlagDefinitionError(`flag "${key}": targeting must be a list of rules`)
  }
  const targeting = ((flag.targeting ?? []) as ReadonlyArray<unknown>).map((rule, i) => checkRule(key, i, rule))
  if (flag.variants !== undefined && !Array.isArray(flag.variants)) {
    throw new FlagDefinitionError(`flag "${key}": variants must be a list of {name, value, weight?}`)
  }
  const names = new Set<string>()
  const variants = ((flag.variants ?? []) as ReadonlyArray<unknown>).map((variant, i) => {
    if (!isRecord(variant) || typeof variant.name !== "string" || variant.name.length === 0 || !("value" in variant)) {
      throw new FlagDefinitionError(`flag "${key}": variants[${i}] must be {name: non-empty string, value, weight?}`)
    }
    if (names.has(variant.name)) throw new FlagDefinitionError(`flag "${key}": variant "${variant.name}" is declared twice`)
    names.add(variant.name)
    const weight = variant.weight === undefined ? 1 : variant.weight
    if (typeof weight !== "number" || !Number.isFinite(weight) || weight < 0) {
      throw new FlagDefinitionError(`flag "${key}": variant "${variant.name}" weight must be a finite number ≥ 0`)
    }
    return { name: variant.name, value: variant.value, weight }
  })
  const totalWeight = variants.reduce((sum, variant) => sum + variant.weight, 0)
  if (variants.length > 0 && totalWeight <= 0) {
    throw new FlagDefinitionError(`flag "${key}": at least one variant needs a positive weight`)
  }
  if (flag.offVariant !== undefined && (typeof flag.offVariant !== "string" || !names.has(flag.offVariant))) {
    throw new FlagDefinitionError(`flag "${key}": offVariant ${JSON.stringify(flag.offVariant)} is not one of its variants`)
  }
  let activateAt: number | undefined
  let deactivateAt: number | undefined
  let ramp: Resolved["ramp"]
  if (flag.schedule !== undefined) {
    const schedule = flag.schedule
    if (!isRecord(schedule)) throw new FlagDefinitionError(`flag "${key}": schedule must be an object`)
    for (const name of Object.keys(schedule)) {
      if (name !== "activateAt" && name !== "deactivateAt" && name !== "ramp") {
        throw new FlagDefinitionError(`flag "${key}": schedule has an unknown field "${name}"`)
      }
    }
    if (schedule.activateAt !== undefined) activateAt = instant(key, "schedule.activateAt", schedule.activateAt)
    if (schedule.deactivateAt !== undefined) deactivateAt = instant(key, "schedule.deactivateAt", schedule.deactivateAt)
    if (activateAt !== undefined && deactivateAt !== undefined && deactivateAt <= activateAt) {
      throw new FlagDefinitionError(`flag "${key}": schedule.deactivateAt must be after activateAt`)
    }
    if (schedule.ramp !== undefined) {
      const r = schedule.ramp
      if (!isRecord(r)) throw new FlagDefinitionError(`flag "${key}": schedule.ramp must be {from, to, startAt, endAt}`)
      const from = percentage(key, "schedule.ramp.from", r.from)
      const to = percentage(key, "schedule.ramp.to", r.to)
      const startAt = instant(key, "schedule.ramp.startAt", r.startAt)
      const endAt = instant(key, "schedule.ramp.endAt", r.endAt)
      if (endAt <= startAt) throw new FlagDefinitionError(`flag "${key}": schedule.ramp.endAt must be after startAt`)
      ramp = { from, to, startAt, endAt }
    }
  }
  if (flag.description !== undefined && typeof flag.description !== "string") {
    throw new FlagDefinitionError(`flag "${key}": description must be a string`)
  }
  return {
    key,
    enabled: flag.enabled ?? true,
    rollout,
    rolloutBy: flag.rolloutBy === "tenant" ? "tenant" : "subject",
    targeting,
    variants,
    totalWeight,
    offVariant: flag.offVariant as string | undefined,
    activateAt,
    deactivateAt,
    ramp,
    description: flag.description as string | undefined,
    boolean: false,
    timed: activateAt !== undefined || deactivateAt !== undefined || ramp !== undefined,
    matchers: targeting.map(compileRule)
  }
}

/**
 * Applies an override: it patches only the fields it names (on a boolean flag, the patch applies to
 * `{enabled: <the boolean>}`). The result is checked like a definition.
 */
export const patch = (key: string, base: Flag, override: Readonly<Record<string, unknown>>): Resolved => {
  const start: Record<string, unknown> = typeof base === "boolean" ? { enabled: base } : { ...base }
  for (const [name, value] of Object.entries(override)) {
    // Checked here, not only by `resolve`: assigning an override's own `__proto__` key (JSON.parse
    // makes one) would set the prototype, whose fields `resolve` reads but never lists.
    if (!flagFields.has(name)) throw new FlagDefinitionError(`flag "${key}" has an unknown field "${name}"`)
    if (value === undefined) continue
    start[name] = value
  }
  const resolved = resolve(key, start)
  return typeof base === "boolean" && resolved.variants.length === 0 ? { ...resolved, boolean: true } : resolved
}
