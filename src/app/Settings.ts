/**
 * Numbers the framework reads from the environment or from options. A value that parses to nonsense
 * (empty, negative, fractional, `12abc`) must stop the boot with a message naming where it came
 * from, never quietly become 0 or NaN: an empty `FW_MAX_BODY_BYTES=` once made every body a 413.
 */
import { Config, Effect, Option, Schema } from "effect"
import * as Launch from "./Launch.js"

/** A setting that is not what the framework expects. */
export class SettingInvalid extends Schema.TaggedError<SettingInvalid>()("SettingInvalid", {
  /** The environment variable or option path, e.g. `FW_MAX_BODY_BYTES` or `http.maxBodyBytes`. */
  setting: Schema.String,
  expected: Schema.String
}) {
  override get message() {
    return `${this.setting} must be ${this.expected}`
  }
}

const positiveIntegerText = /^\d+$/

/**
 * A positive integer from the environment variable `name`; unset or empty means `fallback`.
 * Anything else that is not a positive safe integer fails `SettingInvalid` naming the variable.
 */
export const positiveIntegerFromEnv = (name: string, fallback: number): Effect.Effect<number, SettingInvalid> =>
  Config.option(Config.string(name)).pipe(
    Effect.orElseSucceed(() => Option.none<string>()),
    Effect.flatMap((raw) => {
      const text = Option.getOrElse(raw, () => "").trim()
      if (text.length === 0) return Effect.succeed(fallback)
      const value = positiveIntegerText.test(text) ? Number(text) : Number.NaN
      return isPositiveInteger(value)
        ? Effect.succeed(value)
        : Effect.fail(new SettingInvalid({ setting: name, expected: "a positive integer (unset or empty for the default)" }))
    })
  )

/**
 * A TCP port from the environment variable `name` (1 to 65535); unset or empty means `fallback`.
 * Anything else fails `SettingInvalid` naming the variable.
 */
export const portFromEnv = (name: string, fallback: number): Effect.Effect<number, SettingInvalid> => {
  const invalid = () => new SettingInvalid({ setting: name, expected: "a port number from 1 to 65535 (unset or empty for the default)" })
  return positiveIntegerFromEnv(name, fallback).pipe(Effect.filterOrFail((port) => port <= 65535, invalid), Effect.mapError(invalid))
}

const isPositiveInteger = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value > 0

/**
 * Checks an optional numeric option at definition time: absent is fine, otherwise it must be a
 * positive integer. Throws `SettingInvalid` naming the option (a definition error is a programming error).
 */
export const checkPositiveInteger = (setting: string, value: unknown): void => {
  if (value !== undefined && !isPositiveInteger(value)) {
    throw new SettingInvalid({ setting, expected: "a positive integer" })
  }
}

/** Like `checkPositiveInteger`, for options where 0 means something (no skew, refresh off). */
export const checkNonNegativeInteger = (setting: string, value: unknown): void => {
  if (value !== undefined && !(value === 0 || isPositiveInteger(value))) {
    throw new SettingInvalid({ setting, expected: "a non-negative integer" })
  }
}

/**
 * Reading configuration where an app is declared (module top level, beside `defineApp`): these
 * read `process.env` synchronously and throw `SettingInvalid` naming the variable and what is
 * expected, so a missing secret stops the boot with that line (`fw: <message>`, see `Launch`)
 * instead of a `TypeError` from deep inside the framework.
 */
const envText = (name: string): string | undefined => {
  // `globalThis.process`: this module is also bundled for browsers, where no environment exists.
  const raw = globalThis.process?.env[name]?.trim()
  return raw === undefined || raw.length === 0 ? undefined : raw
}

/** Throws `SettingInvalid` without the stack: the message says all, and the stack would bury it. */
const refuse = (setting: string, expected: string): never => {
  const error = new SettingInvalid({ setting, expected })
  error.stack = `SettingInvalid: ${error.message}`
  // At a module's top level nothing but the process hook can report it in one line (see `Launch`).
  Launch.reportIfUncaught()
  throw error
}

/**
 * A secret from the environment variable `name`: set, and at least `minBytes` bytes (default 32,
 * what session signing needs). Never echoes the value.
 */
export const secretFromEnv = (name: string, options: { readonly minBytes?: number } = {}): string => {
  const minBytes = options.minBytes ?? 32
  const value = envText(name)
  if (value === undefined) return refuse(name, `set to a secret of at least ${minBytes} bytes (e.g. the output of \`openssl rand -base64 48\`)`)
  const bytes = new TextEncoder().encode(value).length
  if (bytes < minBytes) return refuse(name, `a secret of at least ${minBytes} bytes (it has ${bytes})`)
  return value
}

/**
 * An http(s) or other absolute URL from the environment variable `name` (`protocols` limits the
 * schemes, e.g. `["postgres:", "postgresql:"]`); unset means `fallback` when one is given.
 */
export const urlFromEnv = (
  name: string,
  options: { readonly fallback?: string; readonly protocols?: ReadonlyArray<string> } = {}
): string => {
  const value = envText(name) ?? options.fallback
  const schemes = options.protocols === undefined ? "an absolute URL" : `a URL starting with ${options.protocols.join(" or ")}//`
  if (value === undefined) return refuse(name, `set to ${schemes}`)
  if (!URL.canParse(value)) return refuse(name, `${schemes} (it does not parse as a URL)`)
  const protocol = new URL(value).protocol
  if (options.protocols !== undefined && !options.protocols.includes(protocol)) return refuse(name, `${schemes} (it is ${protocol}//…)`)
  return value
}

/** A positive integer from the environment variable `name`; unset or empty means `fallback` (throws `SettingInvalid`). */
export const positiveIntegerFromEnvSync = (name: string, fallback: number): number => {
  const text = envText(name)
  if (text === undefined) return fallback
  const value = positiveIntegerText.test(text) ? Number(text) : Number.NaN
  return isPositiveInteger(value) ? value : refuse(name, "a positive integer (unset or empty for the default)")
}
