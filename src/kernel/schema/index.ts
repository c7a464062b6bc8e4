/**
 * What a table is and how its rows look on every tier: declarations, columns, the row codec,
 * strict instants, and the schema differ that makes a database match the declarations (never dropping).
 */
export * as Columns from "./Columns.js"
export * as DdlLock from "./DdlLock.js"
export * as IsoInstant from "./IsoInstant.js"
export * as RowCodec from "./RowCodec.js"
export * as SchemaDiffer from "./SchemaDiffer.js"
export * as Table from "./Table.js"
