/**
 * An aggregate's refresh policy in words, for people (the dashboard): `{cron: "0 * * * *", timezone:
 * "America/New_York"}` reads "every hour at :00, America/New_York". Cron expressions are described
 * from their parsed fields (`Cron.Cron`), so names, ranges, steps and lists all read the same way
 * whatever way they were written; a combination without a short phrase is spelled out field by field.
 */
import type { Cron } from "effect"
import type * as Aggregate from "./Aggregate.js"

const weekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
const months = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October", "November", "December"]

/** A field's values; Effect's `Cron` keeps a `*` field as the empty set. */
const sorted = (set: ReadonlySet<number>, from: number, to: number) =>
  set.size === 0 ? Array.from({ length: to - from + 1 }, (_, i) => from + i) : [...set].sort((a, b) => a - b)
const two = (n: number) => String(n).padStart(2, "0")

/** "a", "a and b", "a, b and c". */
const andList = (items: ReadonlyArray<string>): string =>
  items.length <= 1 ? items.join("") : `${items.slice(0, -1).join(", ")} and ${items[items.length - 1]}`

/** Runs of consecutive numbers: [1,2,3,5] → [[1,3],[5,5]]. */
const runs = (values: ReadonlyArray<number>): Array<[number, number]> => {
  const out: Array<[number, number]> = []
  for (const value of values) {
    const last = out[out.length - 1]
    if (last !== undefined && last[1] === value - 1) last[1] = value
    else out.push([value, value])
  }
  return out
}

/** A list of numbers with runs of three or more as ranges: "1, 15" or "9 to 17". */
const numbers = (values: ReadonlyArray<number>, name: (n: number) => string = String): string =>
  andList(runs(values).flatMap(([from, to]) =>
    to - from >= 2 ? [`${name(from)} to ${name(to)}`] : from === to ? [name(from)] : [name(from), name(to)]
  ))

/** The step of `values` when they are every `step`th value of the field from 0 (`*\/step`), else undefined. */
const stepOf = (values: ReadonlyArray<number>, size: number): number | undefined => {
  if (values.length < 2 || values[0] !== 0) return undefined
  const step = values[1]!
  if (size % step !== 0 || values.length !== size / step) return undefined
  return values.every((value, i) => value === i * step) ? step : undefined
}

const every = (n: number, unit: string) => n === 1 ? `every ${unit}` : `every ${n} ${unit}s`

/** The time-of-day part: when in a day the expression fires. */
const timeOf = (cron: Cron.Cron): string => {
  const minutes = sorted(cron.minutes, 0, 59)
  const hours = sorted(cron.hours, 0, 23)
  const seconds = sorted(cron.seconds, 0, 59)
  const allMinutes = minutes.length === 60
  const allHours = hours.length === 24
  const secondStep = stepOf(seconds, 60)
  const onTheMinute = seconds.length === 1 && seconds[0] === 0
  const secondsPart = onTheMinute
    ? ""
    : seconds.length === 60
    ? "every second"
    : secondStep !== undefined
    ? every(secondStep, "second")
    : `at second ${numbers(seconds)}`
  if (allMinutes && allHours) return secondsPart === "" ? "every minute" : secondsPart
  const prefix = secondsPart === "" ? "" : `${secondsPart} of `
  const minuteStep = stepOf(minutes, 60)
  const hourStep = stepOf(hours, 24)
  if (allHours) {
    if (minuteStep !== undefined) return `${prefix}${every(minuteStep, "minute")}`
    return `${prefix}every hour at ${andList(minutes.map((m) => `:${two(m)}`))}`
  }
  if (allMinutes) return `${prefix}every minute from ${numbers(hours, (h) => `${two(h)}:00`)} to the hour's end`
  if (hourStep !== undefined && minutes.length === 1) return `${prefix}${every(hourStep, "hour")} at :${two(minutes[0]!)}`
  if (minutes.length * hours.length <= 6) {
    return `${prefix}at ${andList(hours.flatMap((h) => minutes.map((m) => `${two(h)}:${two(m)}`)))}`
  }
  const minutePart = minuteStep !== undefined ? every(minuteStep, "minute") : `at minute ${numbers(minutes)}`
  return `${prefix}${minutePart} of hour ${numbers(hours, two)}`
}

/** The calendar part: on which days (empty for every day). */
const daysOf = (cron: Cron.Cron): string => {
  const days = sorted(cron.days, 1, 31)
  const week = sorted(cron.weekdays, 0, 6)
  const inMonths = cron.months.size === 0 || cron.months.size === 12 ? "" : ` in ${numbers(sorted(cron.months, 1, 12), (m) => months[m - 1]!)}`
  const allDays = days.length === 31
  const allWeek = week.length === 7
  const dayPart = `on day ${numbers(days)} of the month`
  const weekPart = `on ${numbers(week, (d) => weekdays[d]!)}`
  // Both restricted: a day fires when either matches (the cron rule of Vixie cron and Effect's Cron).
  const part = allDays && allWeek ? "" : allWeek ? dayPart : allDays ? weekPart : `${dayPart} or ${weekPart}`
  return `${part === "" ? "" : ` ${part}`}${inMonths}`
}

/** A cron expression's schedule in words (without its time zone). */
export const cronWords = (cron: Cron.Cron): string => {
  const time = timeOf(cron)
  const days = daysOf(cron)
  // A once-a-day time with no day restriction reads "every day at 03:00".
  return days === "" && /^at \d/.test(time) ? `every day ${time}` : `${time}${days}`
}

/** A duration in the largest whole unit that fits: 3600000 → "1 hour", 90000 → "90 seconds". */
export const durationWords = (ms: number): string => {
  const units: ReadonlyArray<readonly [number, string]> = [[86_400_000, "day"], [3_600_000, "hour"], [60_000, "minute"], [1_000, "second"]]
  for (const [size, unit] of units) {
    if (ms >= size && ms % size === 0) return ms === size ? `1 ${unit}` : `${ms / size} ${unit}s`
  }
  return `${ms} ms`
}

/** An aggregate's refresh policy in words. */
export const describe = (aggregate: Aggregate.Any): string => {
  const policy = aggregate.policy
  const incremental = aggregate.incremental === undefined ? "" : `kept current on every change to ${aggregate.incremental.source}; `
  switch (policy._tag) {
    case "manual":
      return incremental === "" ? "only when refreshed by hand" : `kept current on every change to ${aggregate.incremental!.source}`
    case "interval":
      return `${incremental}${incremental === "" ? "" : "rebuilt "}every ${durationWords(policy.ms).replace(/^1 /, "")}`
    case "cron":
      return `${incremental}${incremental === "" ? "" : "rebuilt "}${cronWords(policy.cron)}, ${policy.timezone}`
    case "hybrid":
      return `${incremental}every ${durationWords(policy.ms).replace(/^1 /, "")}, and ${durationWords(policy.debounceMs)} after a change to ${
        andList([...policy.onChange])
      }`
  }
}
