import { createClient } from 'ruvio-client';

const c = createClient({ host: '127.0.0.1', port: 6379 });
const token = await c.semaphore('upstream:billing', 8, 15_000);
// '1700000000123' -> a slot, this is your token (a decimal string)
// null            -> all 8 slots are taken
if (token !== null) {
  await c.release('upstream:billing', token);
}
