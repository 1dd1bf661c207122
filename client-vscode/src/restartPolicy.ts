/**
 * When the server process dies: restart it, up to `maxRestarts` times within `windowMs`, then
 * stop and tell the user (a server that crashes at start would otherwise loop forever).
 */
export interface RestartDecision {
  restart: boolean;
  /** How many crashes fall within the window, this one included. */
  crashes: number;
}

export class RestartPolicy {
  private crashes: number[] = [];

  constructor(
    readonly maxRestarts = 4,
    readonly windowMs = 3 * 60 * 1000,
  ) {}

  /** Record a crash at `now` (milliseconds) and decide. */
  onCrash(now: number): RestartDecision {
    this.crashes = this.crashes.filter((t) => now - t < this.windowMs);
    this.crashes.push(now);
    return { restart: this.crashes.length <= this.maxRestarts, crashes: this.crashes.length };
  }

  /** A restart by the user starts counting afresh. */
  reset(): void {
    this.crashes = [];
  }
}

export function crashMessage(d: RestartDecision, policy: RestartPolicy): string {
  if (d.restart) {
    return `citewise: the language server stopped unexpectedly; restarting it (${d.crashes} of ${policy.maxRestarts}).`;
  }
  const minutes = Math.round(policy.windowMs / 60000);
  return (
    `citewise: the language server stopped ${d.crashes} times in ${minutes} minutes and will not be restarted. ` +
    'The output shows why; "Restart server" tries again.'
  );
}
