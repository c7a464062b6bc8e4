/** Bundling for the browser, as the client tests need it. */
import * as esbuild from "esbuild"
import { gzipSync } from "node:zlib"

/** Bundles `entry` for the browser, minified, in memory. */
export const bundle = async (entry: string) => {
  const result = await esbuild.build({
    entryPoints: [entry],
    bundle: true,
    platform: "browser",
    format: "esm",
    minify: true,
    write: false,
    metafile: true,
    logLevel: "silent",
    // React reads it; a browser has no `process`.
    define: { "process.env.NODE_ENV": "\"production\"" }
  })
  const [file] = result.outputFiles
  const [output] = Object.values(result.metafile.outputs)
  if (file === undefined || output === undefined) throw new Error("esbuild produced no output")
  return { code: file.text, bytes: file.contents.length, gzip: gzipSync(file.contents).length, output, inputs: Object.keys(result.metafile.inputs) }
}
