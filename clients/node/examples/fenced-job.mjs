// A job that runs on one worker at a time and fences its writes with the lock's token.
//   RUVIO_URL=redis://127.0.0.1:6379 node examples/fenced-job.mjs
import { createClient, LockNotAcquiredError } from 'ruvio-client';

const c = createClient({ url: process.env.RUVIO_URL ?? 'redis://127.0.0.1:6379' });
try {
  const written = await c.using('example:job:nightly-report', 10_000, async (signal, lock) => {
    let n = 0;
    for (const part of ['header', 'body', 'footer']) {
      if (signal.aborted) throw signal.reason;             // the lock was lost: stop writing
      // IFGT refuses a write carrying an older token than the newest one the key has seen.
      if (await c.ifgt(`example:report:${part}`, lock.token, `${part} written under ${lock.token}`)) n++;
    }
    return n;
  });
  console.log(`wrote ${written} parts`);
} catch (e) {
  if (e instanceof LockNotAcquiredError) console.log('another worker runs the job');
  else throw e;
} finally {
  await c.close();
}
