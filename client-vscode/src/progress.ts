/**
 * LSP progress (`$/progress` with begin/report/end and an absolute percentage) into VS Code's
 * progress API, which takes increments. Pure, so the arithmetic is tested without VS Code.
 */
export interface ProgressValue {
  kind: "begin" | "report" | "end";
  title?: string;
  message?: string;
  percentage?: number;
  cancellable?: boolean;
}

export interface ProgressStep {
  message?: string;
  increment?: number;
}

/** Turns absolute percentages into the increments `Progress.report` wants (never backwards). */
export class PercentTracker {
  private last = 0;

  step(value: ProgressValue): ProgressStep {
    const out: ProgressStep = {};
    if (value.message !== undefined) {
      out.message = value.message;
    }
    if (typeof value.percentage === "number") {
      const pct = Math.max(0, Math.min(100, value.percentage));
      if (pct > this.last) {
        out.increment = pct - this.last;
        this.last = pct;
      }
    }
    return out;
  }
}
