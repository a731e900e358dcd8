// One contending process: takes the lock, does a read-modify-write that loses updates unless the lock excludes
// the other process, releases; reports how many rounds it completed.
import Redis from 'ioredis';
import Redlock from 'redlock';

const [port, rounds] = process.argv.slice(2).map(Number);
const client = new Redis({ host: '127.0.0.1', port });
const redlock = new Redlock([client], { retryCount: 2000, retryDelay: 10, retryJitter: 10 });
let done = 0;
for (let i = 0; i < rounds; i++) {
  const lock = await redlock.acquire(['c:lock'], 5000);
  const v = Number((await client.get('c:count')) || 0);
  await new Promise((r) => setTimeout(r, 2));
  await client.set('c:count', String(v + 1));
  await lock.release();
  done++;
}
client.disconnect();
process.send(done, () => process.exit(0));
