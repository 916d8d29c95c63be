// Waiting in tests for something that happens elsewhere (a process, a
// server, the kernel), with a deadline and a failure that says what.

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** Waits until `check` holds, asking every `everyMs`; fails naming `what` after `ms`. */
export async function eventually(check, what, ms = 15_000, everyMs = 100) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}
