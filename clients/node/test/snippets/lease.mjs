import { createClient } from 'ruvio-client';

const c = createClient({ host: '127.0.0.1', port: 6379 });
const token = await c.lease('job:nightly-report', 30_000);
// token -> you hold it
// null -> someone else holds it
if (token !== null) {
  const released = await c.release('job:nightly-report', token);
  // true -> released (false if the token no longer matches)
}
