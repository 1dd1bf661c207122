/**
 * The `citewise` configuration section holds the server's settings (`citewise.k`, `citewise.store`,
 * ...) and a few the extension keeps for itself (`citewise.server.command`, `citewise.trace.server`).
 * Only the server's are sent to it: the server reports every unknown key as a warning.
 * `tests/test_vscode_settings.py` checks that every other key of package.json is a server setting.
 */

/** Top-level keys under `citewise` that belong to the extension, never sent to the server. */
export const CLIENT_ONLY_KEYS: readonly string[] = ["server", "trace"];

export type JsonObject = { [key: string]: unknown };

/** The server's part of the `citewise` section (a plain JSON copy, so nothing of VS Code leaks through). */
export function serverSettings(section: unknown): JsonObject {
  if (section === null || typeof section !== "object" || Array.isArray(section)) {
    return {};
  }
  const plain = JSON.parse(JSON.stringify(section)) as JsonObject;
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(plain)) {
    if (!CLIENT_ONLY_KEYS.includes(key) && value !== undefined && value !== null) {
      out[key] = value;
    }
  }
  return out;
}

/**
 * A `workspace/configuration` answer with the `citewise` items reduced to the server's settings;
 * other sections (a server may ask for anything) are passed as they are.
 */
export function filterConfigurationResult(sections: (string | undefined)[], result: unknown[]): unknown[] {
  return result.map((value, i) => (sections[i] === "citewise" ? serverSettings(value) : value));
}
