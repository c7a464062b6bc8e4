#!/usr/bin/env node
// Loads TypeScript entries (the app's main.ts) through tsx, then runs the fw CLI: from the sources
// in a checkout of the framework, from the built `dist/` in an installed package (which ships no src).
import { register } from "tsx/esm/api"
import { existsSync } from "node:fs"

register()
const source = new URL("../src/server/bin.ts", import.meta.url)
await import(existsSync(source) ? source.href : new URL("../dist/server/bin.js", import.meta.url).href)
