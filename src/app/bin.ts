#!/usr/bin/env node
import { NodeContext, NodeRuntime } from "@effect/platform-node"
import { Effect } from "effect"
import * as Cli from "./Cli.js"

Cli.run(process.argv).pipe(Effect.provide(NodeContext.layer), NodeRuntime.runMain)
