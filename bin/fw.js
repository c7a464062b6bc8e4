#!/usr/bin/env node
// Loads TypeScript entries (the app's main.ts) through tsx, then runs the fw CLI.
import { register } from "tsx/esm/api"

register()
await import("../src/server/bin.ts")
