// Bundles the extension and vscode-languageclient into out/extension.js, so the .vsix ships no
// node_modules (`vsce package --no-dependencies`). `tsc` (npm run compile) type-checks first.
import * as esbuild from "esbuild";

const watch = process.argv.includes("--watch");
const options = {
  entryPoints: ["src/extension.ts"],
  bundle: true,
  outfile: "out/extension.js",
  external: ["vscode"],
  format: "cjs",
  platform: "node",
  target: "node18",
  minify: !watch,
  sourcemap: watch,
  logLevel: "warning",
};

if (watch) {
  const ctx = await esbuild.context(options);
  await ctx.watch();
} else {
  await esbuild.build(options);
}
