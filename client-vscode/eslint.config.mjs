// ESLint flat config: the recommended JavaScript and typescript-eslint rules over src/ and test/.
import js from "@eslint/js";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["out/**", "node_modules/**", "e2e/**", "*.vsix"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    rules: {
      "@typescript-eslint/no-unused-vars": ["error", { argsIgnorePattern: "^_" }],
      eqeqeq: "error",
      curly: "error",
      "no-restricted-imports": ["error", { paths: [] }],
    },
  },
  {
    // The pure modules are unit-tested in plain Node: they must not need VS Code.
    files: ["src/resolve.ts", "src/progress.ts", "src/settings.ts", "src/status.ts", "src/restartPolicy.ts", "src/citeInsert.ts", "src/suggestions.ts", "src/labels.ts", "test/**/*.ts"],
    rules: {
      "no-restricted-imports": ["error", { paths: [{ name: "vscode", message: "pure module: no VS Code API here" }] }],
    },
  },
  {
    files: ["*.mjs"],
    languageOptions: { globals: { process: "readonly", console: "readonly" } },
  },
);
