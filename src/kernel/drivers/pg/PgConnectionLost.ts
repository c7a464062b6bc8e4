/**
 * Whether a failed statement's connection is gone. node-postgres reports a connection ended by the
 * server (its FATAL, then the closed socket) only a moment after the statement that met the FATAL
 * fails: a statement sent in between would fail too. Callers holding a connection of their own
 * drop it when its statement fails this way, instead of waiting for the driver's `end`.
 */
import { Predicate } from "effect"

/**
 * `error` (a node-postgres failure) leaves its connection unusable: not the server's answer (a
 * socket error, the driver's "Connection terminated"), whether the connection survives is then
 * unknown; or the server's, of class 08 (connection exception), 57P (the server ended the session:
 * shutdown, a terminated backend, a dropped database, an idle timeout), 25P03 (an idle
 * transaction's timeout), or of severity FATAL or PANIC (the session ends after it; the severity
 * is localized, hence the codes too).
 */
export const connectionLost = (error: unknown): boolean => {
  const code = Predicate.hasProperty(error, "code") ? error.code : undefined
  const severity = Predicate.hasProperty(error, "severity") ? error.severity : undefined
  // Node's socket errors have codes too (EPIPE, ECONNRESET), but no severity.
  if (typeof code !== "string" || typeof severity !== "string") return true
  return code.startsWith("08") || code.startsWith("57P") || code === "25P03" || severity === "FATAL" ||
    severity === "PANIC"
}
