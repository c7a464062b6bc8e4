/**
 * ISO-8601 date strings read strictly, the same on every machine. `Date.parse` reads a date-time
 * without a zone in the process's local zone (2026-03-01T09:00:00 is 09:00Z on a UTC server and
 * 14:00Z in New York) and rolls a day or time that does not exist over (2026-02-30 is 2 March);
 * both would make replicas in different zones, or a laptop and a server, disagree. Here a date
 * alone is UTC midnight, a zone-less date-time is read as UTC or refused (the caller says which:
 * data already written is read, a definition can be corrected), and a day or time that does not
 * exist is refused. Used by standing (a freshness stamp: zone-less is UTC), flags (a schedule
 * instant: refused) and search (a filter value: refused); search's `isoInstant` for a document's
 * dates reads zone-less ones as UTC too, but still rolls a day that does not exist over.
 */
import { Either } from "effect"

/** Why a string names no single instant. */
export type Refusal =
  /** Not an ISO-8601 date or date-time (`YYYY-MM-DD`, optionally `THH:MM[:SS[.fff]]` and a zone). */
  | "not-iso"
  /** A date-time without `Z` or an offset, where zone-less ones are refused. */
  | "zone-missing"
  /** A day, time or offset that does not exist (2026-02-30, 24:00, 09:60, +25:00). */
  | "no-such-time"

/** What a date-time without its zone means: UTC, or no instant at all. */
export type Zoneless = "utc" | "refuse"

/** Groups: y, m, d, h, min, s, fraction, zone, offset sign, offset hours, offset minutes. */
const pattern = /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d+))?)?(Z|([+-])(\d{2}):?(\d{2}))?)?$/

/** The epoch ms `text` names, or why it names none (see the module doc). */
export const parse = (text: string, zoneless: Zoneless): Either.Either<number, Refusal> => {
  const match = pattern.exec(text)
  if (match === null) return Either.left("not-iso")
  const [, y, m, d, h, min, s, fraction, zone, sign, offsetH, offsetMin] = match
  if (h !== undefined && zone === undefined && zoneless === "refuse") return Either.left("zone-missing")
  const [year, month, day, hour, minute, second] = [y, m, d, h ?? "0", min ?? "0", s ?? "0"].map(Number) as [number, number, number, number, number, number]
  const date = new Date(0)
  // setUTCFullYear, not Date.UTC: Date.UTC reads years 0–99 as 1900–1999.
  date.setUTCFullYear(year, month - 1, day)
  const exists = date.getUTCFullYear() === year && date.getUTCMonth() === month - 1 && date.getUTCDate() === day
  if (!exists || hour > 23 || minute > 59 || second > 59 || Number(offsetH ?? 0) > 23 || Number(offsetMin ?? 0) > 59) {
    return Either.left("no-such-time")
  }
  const offset = sign === undefined ? 0 : (sign === "-" ? -1 : 1) * (Number(offsetH) * 60 + Number(offsetMin)) * 60_000
  // Digits below the millisecond are dropped, as Date.parse does.
  const millis = fraction === undefined ? 0 : Number(fraction.slice(0, 3).padEnd(3, "0"))
  return Either.right(date.getTime() + ((hour * 60 + minute) * 60 + second) * 1000 + millis - offset)
}
