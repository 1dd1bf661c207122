/**
 * Completion labels keep their details through `completionItem/resolve`.
 *
 * The server sends `labelDetails` (the title line beside the key, server/completion_labels.py) and the
 * language client turns them into VS Code's `{label, description}`. On resolve the client sends
 * the item back without them (the server does not announce `completionItem.labelDetailsSupport`)
 * and VS Code takes the resolved item's label, so the focused row would lose its title. The
 * middleware puts the shown label back on the resolved item.
 */
export type Label = string | { label: string; detail?: string; description?: string };

export interface Labelled {
  label: Label;
}

export function keepLabelDetails<T extends Labelled>(shown: Labelled, resolved: T | null | undefined): T | null | undefined {
  if (resolved === null || resolved === undefined) {
    return resolved;
  }
  if (typeof shown.label !== "string") {
    const text = typeof resolved.label === "string" ? resolved.label : resolved.label.label;
    if (text === shown.label.label && (typeof resolved.label === "string" || !resolved.label.description)) {
      resolved.label = shown.label;
    }
  }
  return resolved;
}
