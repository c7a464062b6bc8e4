/**
 * Values from outside (a request's keys, ids, paths, a caller-typed note, a peer's error text) as
 * they may appear in a log line. The rule, everywhere in fw: such a value reaches a log message or
 * a log annotation only through `quote`. Effect's default and pretty loggers print messages and
 * annotations as they are, so a raw `\n` would start a forged line and an escape sequence would
 * drive the operator's terminal; `Logger.json` escapes, but the same quoted text reads the same
 * there.
 */

// C0 controls, DEL and C1 controls (ESC and CSI drive terminals), the Unicode line and paragraph
// separators (a line break to some viewers), and the bidirectional overrides and isolates (text
// that reads differently from what it is).
// eslint-disable-next-line no-control-regex
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const escape = (char: string) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`

/**
 * `value` as one line of printable text: a string JSON-quoted, anything else as its JSON (its
 * `String`, JSON-quoted, when it has none), with every control, separator and bidirectional
 * character escaped as `\uXXXX`.
 */
export const quote = (value: unknown): string => {
  let text: string | undefined
  try {
    text = JSON.stringify(value)
  } catch {
    text = undefined
  }
  return (text ?? JSON.stringify(String(value))).replace(unsafe, escape)
}

/** Each value `quote`d, joined with `, `. */
export const quoteAll = (values: Iterable<unknown>): string => Array.from(values, quote).join(", ")
