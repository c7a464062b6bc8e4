/**
 * The SAML area's tables, used when the plugin keeps its one-time ids in the app's store (so every
 * replica shares them): `_fw_saml_replay` for outstanding AuthnRequest ids and seen assertion ids,
 * `_fw_saml_logout` for outstanding LogoutRequest ids and seen IdP LogoutRequest ids.
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

const fields = {
  /** `request`, `assertion`, `logout` or `idp-logout`: the id is `<kind>:<message id>`. */
  kind: Schema.String,
  /** Epoch milliseconds after which the id is forgotten. */
  expiresAt: Schema.Number
}

/** `_fw_saml_replay`: AuthnRequest ids until consumed, assertion ids until they expire. */
export const SamlReplay = defineTable("_fw_saml_replay", { fields, indexes: [["expiresAt"]] })

/** `_fw_saml_logout`: LogoutRequest ids until answered, IdP LogoutRequest ids until they expire. */
export const SamlLogout = defineTable("_fw_saml_logout", { fields, indexes: [["expiresAt"]] })
