/**
 * Values that `String.prototype.trim` (or a Unicode-aware normaliser) would turn into
 * `alice@example.test`: Unicode spaces and U+FEFF, which XML and mail both count as content. Shared
 * by the SAML and provisioning tests so both refuse to merge the same cases (issue 18).
 */
export const unicodeVariants: ReadonlyArray<string> = [
  "alice@example.test\u00a0",
  "\ufeffalice@example.test",
  "alice@example.test\u3000",
  "\u2003alice@example.test",
  "\u205falice@example.test\u200a"
]
