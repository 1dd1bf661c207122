/**
 * The interpreter of the Python environment selected in the Python extension (ms-python.python),
 * when that extension is installed: citewise installed into it sits next to the interpreter.
 * Its API is read untyped (no dependency on its npm package) and with a time limit, so a slow or
 * absent Python extension never holds up the server's start.
 */
import * as vscode from "vscode";

interface EnvironmentPath {
  path: string;
}
interface PythonEnvironmentsApi {
  getActiveEnvironmentPath(resource?: vscode.Uri): EnvironmentPath | undefined;
}
interface PythonExtensionApi {
  environments?: PythonEnvironmentsApi;
}

const TIME_LIMIT_MS = 3000;

function withTimeout<T>(p: Thenable<T>, ms: number): Promise<T | undefined> {
  return new Promise((resolve) => {
    const timer = setTimeout(() => resolve(undefined), ms);
    Promise.resolve(p).then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      () => {
        clearTimeout(timer);
        resolve(undefined);
      },
    );
  });
}

export async function findPythonEnvironment(
  resource: vscode.Uri | undefined,
  log: (message: string) => void,
): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension<PythonExtensionApi>("ms-python.python");
  if (ext === undefined) {
    return undefined;
  }
  const api = ext.isActive ? ext.exports : await withTimeout(ext.activate(), TIME_LIMIT_MS);
  const env = api?.environments?.getActiveEnvironmentPath(resource);
  if (env?.path) {
    log(`selected Python environment: ${env.path}`);
  }
  return env?.path || undefined;
}
