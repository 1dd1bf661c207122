import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { crashMessage, RestartPolicy } from "../src/restartPolicy";

describe("RestartPolicy", () => {
  it("restarts up to the limit within the window, then stops", () => {
    const p = new RestartPolicy(2, 1000);
    assert.deepEqual(p.onCrash(0), { restart: true, crashes: 1 });
    assert.deepEqual(p.onCrash(10), { restart: true, crashes: 2 });
    const third = p.onCrash(20);
    assert.deepEqual(third, { restart: false, crashes: 3 });
    assert.match(crashMessage(third, p), /will not be restarted/);
  });

  it("forgets crashes older than the window", () => {
    const p = new RestartPolicy(1, 1000);
    assert.equal(p.onCrash(0).restart, true);
    assert.equal(p.onCrash(1500).restart, true);
    assert.equal(p.onCrash(1600).restart, false);
  });

  it("starts afresh after a restart by the user", () => {
    const p = new RestartPolicy(1, 1000);
    p.onCrash(0);
    assert.equal(p.onCrash(1).restart, false);
    p.reset();
    assert.equal(p.onCrash(2).restart, true);
    assert.match(crashMessage({ restart: true, crashes: 1 }, p), /restarting it \(1 of 1\)/);
  });
});
