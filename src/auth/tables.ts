/**
 * Local users and organisations, provisioned on a user's first login through a login-only
 * provider (hosted login, SAML) and found by email afterwards.
 */
import { Schema } from "effect"
import { defineTable } from "../kernel/schema/Table.js"

/** `_fw_users`: one row per local user; `organizationId` is its tenant. */
export const Users = defineTable("_fw_users", {
  fields: {
    email: Schema.String,
    firstName: Schema.NullOr(Schema.String),
    lastName: Schema.NullOr(Schema.String),
    organizationId: Schema.String,
    /** The strategy id of the provider that provisioned the user. */
    provider: Schema.String,
    /** The provider's id of the user. */
    externalId: Schema.String
  },
  tenantField: "organizationId",
  indexes: [["email"]]
})

/** `_fw_organizations`: one row per tenant; `externalId` is the provider's organisation id, when it has one. */
export const Organizations = defineTable("_fw_organizations", {
  fields: { name: Schema.String, provider: Schema.String, externalId: Schema.NullOr(Schema.String) },
  indexes: [["provider", "externalId"]]
})
