/**
 * Numbers the framework reads from the environment or from options. A value that parses to nonsense
 * (empty, negative, fractional, `12abc`) must stop the boot with a message naming where it came
 * from, never quietly become 0 or NaN: an empty `FW_MAX_BODY_BYTES=` once made every body a 413.
 */
import { Config, Effect, Option, Schema } from "effect"

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
