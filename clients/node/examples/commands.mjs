// Any command, a pipeline, a transaction with WATCH, and pub/sub.
//   RUVIO_URL=redis://127.0.0.1:6379 node examples/commands.mjs
import { createClient } from 'ruvio-client';

const url = process.env.RUVIO_URL ?? 'redis://127.0.0.1:6379';
const c = createClient({ url });

console.log(await c.call('SET', 'example:greeting', 'hello', 'EX', 60));          // OK
console.log(await c.pipeline().incr('example:counter').get('example:counter').exec());

const tx = c.duplicate();                      // WATCH needs a connection of its own
await tx.watch('example:counter');
const value = Number(await tx.get('example:counter'));
console.log(await tx.multi().set('example:counter', value * 2).exec());            // [ 'OK' ] or null
await tx.close();

const sub = c.duplicate();
const got = new Promise((resolve) => sub.subscribe('example:news', (message) => resolve(message)));
await new Promise((r) => setTimeout(r, 100));
await c.publish('example:news', 'hello subscribers');
console.log(await got);
await Promise.all([sub.close(), c.close()]);
