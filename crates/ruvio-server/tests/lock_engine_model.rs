//! A randomized test of the lock engine against a plain model of the rules: leases, semaphores with per-slot TTLs,
//! RENEW/RELEASE by token, DEL, FIFO waiters (some of which leave or time out), expiry by the lock timer and IFGT
//! fences. The engine runs on a real `Store` with a fake monotonic clock; after every step the test lets the timer
//! act (`expire_due`) and then compares the raw keyspace (no lazy expiry) with the model, so a holder the timer
//! forgot would show up.

use std::collections::{HashMap, VecDeque};

use proptest::prelude::*;
use ruvio_protocol::Value;
use ruvio_server::keyspace::{Data, Entry};
use ruvio_server::locks::engine::{self, LockError};
use ruvio_server::locks::Want;
use ruvio_server::store::Store;
use tokio::sync::oneshot;

const KEYS: [&str; 3] = ["k0", "k1", "k2"];
const FENCE_KEYS: [&str; 2] = ["f0", "f1"];

#[derive(Debug, Clone)]
enum Op {
    Acquire { key: usize, limit: Option<u32>, ttl: u64, wait: bool },
    Renew { key: usize, pick: usize, ttl: u64 },
    Release { key: usize, pick: usize },
    Del { key: usize },
    Advance { ms: u64 },
    LeaveWaiter { pick: usize },
    TimeoutWaiter { pick: usize },
    IfGt { key: usize, token: i64 },
    DelFenced { key: usize },
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0..3usize, prop::option::of(1..4u32), 1..40u64, any::<bool>())
            .prop_map(|(key, limit, ttl, wait)| Op::Acquire { key, limit, ttl, wait }),
        2 => (0..3usize, any::<usize>(), 1..40u64).prop_map(|(key, pick, ttl)| Op::Renew { key, pick, ttl }),
        2 => (0..3usize, any::<usize>()).prop_map(|(key, pick)| Op::Release { key, pick }),
        1 => (0..3usize).prop_map(|key| Op::Del { key }),
        3 => (0..30u64).prop_map(|ms| Op::Advance { ms }),
        1 => any::<usize>().prop_map(|pick| Op::LeaveWaiter { pick }),
        1 => any::<usize>().prop_map(|pick| Op::TimeoutWaiter { pick }),
        1 => (0..2usize, 1..6i64).prop_map(|(key, token)| Op::IfGt { key, token }),
        1 => (0..2usize).prop_map(|key| Op::DelFenced { key }),
    ]
}

#[derive(Debug, Clone, PartialEq)]
struct MLock {
    want: Want,
    /// (token, deadline) in grant order.
    holders: Vec<(i64, u64)>,
}

#[derive(Debug)]
struct MWaiter {
    id: u64,
    want: Want,
    ttl: u64,
    rx: Option<oneshot::Receiver<Value>>,
}

#[derive(Default)]
struct Model {
    locks: HashMap<usize, MLock>,
    queues: HashMap<usize, VecDeque<MWaiter>>,
    fences: HashMap<usize, i64>,
    values: HashMap<usize, i64>,
    tokens_seen: Vec<i64>,
}

fn check_kind(lock: Option<&MLock>, want: Want) -> Result<(), LockError> {
    match (lock.map(|l| l.want), want) {
        (None, _) | (Some(Want::Lease), Want::Lease) => Ok(()),
        (Some(Want::Semaphore { limit: have }), Want::Semaphore { limit }) if have != limit => {
            Err(LockError::LimitMismatch { current: have, asked: limit })
        }
        (Some(Want::Semaphore { .. }), Want::Semaphore { .. }) => Ok(()),
        _ => Err(LockError::WrongType),
    }
}

fn has_room(lock: Option<&MLock>, want: Want) -> bool {
    match (lock, want) {
        (None, _) => true,
        (Some(l), Want::Semaphore { limit }) => l.holders.len() < limit as usize,
        (Some(_), Want::Lease) => false,
    }
}

impl Model {
    fn token(&mut self, t: i64) {
        if let Some(last) = self.tokens_seen.last() {
            assert!(t > *last, "tokens must strictly increase: {t} after {last}");
        }
        self.tokens_seen.push(t);
    }

    fn grant(&mut self, key: usize, want: Want, token: i64, deadline: u64) {
        self.token(token);
        self.locks.entry(key).or_insert(MLock { want, holders: Vec::new() }).holders.push((token, deadline));
    }

    /// Expired holders go; freed locks go to waiters in order (the engine has done the same; the values it sent
    /// are read from the receivers here).
    fn settle(&mut self, now: u64) {
        for key in 0..KEYS.len() {
            if let Some(l) = self.locks.get_mut(&key) {
                l.holders.retain(|h| h.1 > now);
                if l.holders.is_empty() {
                    self.locks.remove(&key);
                }
            }
            loop {
                let Some(q) = self.queues.get_mut(&key) else { break };
                let Some(front) = q.front() else { break };
                if front.rx.is_none() {
                    q.pop_front();
                    continue;
                }
                let (want, ttl) = (front.want, front.ttl);
                let lock = self.locks.get(&key);
                let expected: Result<bool, LockError> = check_kind(lock, want).map(|_| has_room(lock, want));
                if expected == Ok(false) {
                    break;
                }
                let mut w = self.queues.get_mut(&key).unwrap().pop_front().unwrap();
                let got = w.rx.as_mut().unwrap().try_recv().expect("the engine served this waiter");
                match expected {
                    Err(e) => assert_eq!(got, e.reply(), "waiter {} gets the error the command would get", w.id),
                    Ok(_) => {
                        let Value::Integer(t) = got else { panic!("grant expected, got {got:?}") };
                        self.grant(key, want, t, now + ttl);
                    }
                }
            }
        }
        // Nobody else may have received anything.
        for q in self.queues.values_mut() {
            for w in q.iter_mut() {
                if let Some(rx) = w.rx.as_mut() {
                    assert!(rx.try_recv().is_err(), "waiter {} got a value out of turn", w.id);
                }
            }
        }
    }

    fn live_waiters(&self, key: usize) -> usize {
        self.queues.get(&key).map_or(0, |q| q.iter().filter(|w| w.rx.is_some()).count())
    }

    fn pick_waiter(&mut self, pick: usize) -> Option<(usize, u64, &mut MWaiter)> {
        let mut all: Vec<&mut MWaiter> = Vec::new();
        let mut keys = Vec::new();
        for (k, q) in self.queues.iter_mut() {
            for w in q.iter_mut().filter(|w| w.rx.is_some()) {
                keys.push(*k);
                all.push(w);
            }
        }
        if all.is_empty() {
            return None;
        }
        let i = pick % all.len();
        let key = keys[i];
        let w = all.swap_remove(i);
        Some((key, w.id, w))
    }
}

/// The engine's lock at `key`, read without expiring anything.
fn snapshot(store: &Store, key: &str) -> Option<MLock> {
    match store.dbs[0].peek(key.as_bytes()) {
        None => None,
        Some(Entry { data: Data::Lease(l), expire_at }) => Some(MLock { want: Want::Lease, holders: vec![(l.token, *expire_at)] }),
        Some(Entry { data: Data::Semaphore(s), expire_at }) => {
            let latest = s.holders.iter().map(|h| h.deadline).max().unwrap();
            assert_eq!(*expire_at, latest, "a semaphore key's deadline is its latest holder's");
            Some(MLock { want: Want::Semaphore { limit: s.limit }, holders: s.holders.iter().map(|h| (h.token, h.deadline)).collect() })
        }
        Some(other) => panic!("unexpected {other:?}"),
    }
}

fn run(ops: Vec<Op>) {
    let mut store = Store::new(1);
    let mut m = Model::default();
    let mut now: u64 = 1_000;
    for op in ops {
        match op {
            Op::Acquire { key, limit, ttl, wait } => {
                let want = limit.map_or(Want::Lease, |limit| Want::Semaphore { limit });
                let got = engine::acquire(&mut store, 0, KEYS[key].as_bytes(), want, ttl, now);
                let lock = m.locks.get(&key);
                let expected = check_kind(lock, want).map(|_| has_room(lock, want) && m.live_waiters(key) == 0);
                match (expected, got) {
                    (Err(e), Err(g)) => assert_eq!(e, g),
                    (Ok(true), Ok(Some(t))) => m.grant(key, want, t, now + ttl),
                    (Ok(false), Ok(None)) => {
                        if wait {
                            let (tx, rx) = oneshot::channel();
                            let id = engine::enqueue_waiter(&mut store, 0, KEYS[key].as_bytes(), want, ttl, tx);
                            m.queues.entry(key).or_default().push_back(MWaiter { id, want, ttl, rx: Some(rx) });
                        }
                    }
                    (e, g) => panic!("acquire {want:?} on {}: model {e:?}, engine {g:?}", KEYS[key]),
                }
            }
            Op::Renew { key, pick, ttl } => {
                let holders = m.locks.get(&key).map(|l| l.holders.clone()).unwrap_or_default();
                // Mostly a current holder's token; sometimes an old or unknown one.
                let token = pick_token(&holders, &m.tokens_seen, pick);
                let got = engine::renew(&mut store, 0, KEYS[key].as_bytes(), token, ttl, now).unwrap();
                let l = m.locks.get_mut(&key);
                let found = l.and_then(|l| l.holders.iter_mut().find(|h| h.0 == token));
                assert_eq!(got, found.is_some(), "renew {token} on {}", KEYS[key]);
                if let Some(h) = found {
                    h.1 = now + ttl;
                }
            }
            Op::Release { key, pick } => {
                let holders = m.locks.get(&key).map(|l| l.holders.clone()).unwrap_or_default();
                let token = pick_token(&holders, &m.tokens_seen, pick);
                let got = engine::release(&mut store, 0, KEYS[key].as_bytes(), token, now).unwrap();
                let held = holders.iter().any(|h| h.0 == token);
                assert_eq!(got, held, "release {token} on {}", KEYS[key]);
                if held {
                    let l = m.locks.get_mut(&key).unwrap();
                    l.holders.retain(|h| h.0 != token);
                    if l.holders.is_empty() {
                        m.locks.remove(&key);
                    }
                }
            }
            Op::Del { key } => {
                // What DEL does: remove, and tell the engine a lock went.
                if let Some(e) = store.dbs[0].remove(KEYS[key].as_bytes(), now) {
                    if e.data.is_lock() {
                        engine::on_lock_gone(&mut store, 0, KEYS[key].as_bytes(), now);
                    }
                }
                store.settle();
                m.locks.remove(&key);
            }
            Op::Advance { ms } => now += ms,
            Op::LeaveWaiter { pick } => {
                if let Some((_, _, w)) = m.pick_waiter(pick) {
                    // The client went away: its receiver is dropped; the engine must skip it.
                    w.rx = None;
                }
            }
            Op::TimeoutWaiter { pick } => {
                if let Some((key, id, w)) = m.pick_waiter(pick) {
                    w.rx = None;
                    assert!(engine::cancel_waiter(&mut store, 0, KEYS[key].as_bytes(), id));
                }
            }
            Op::IfGt { key, token } => {
                let got = engine::fence_write(&mut store, 0, FENCE_KEYS[key].as_bytes(), token, b"v", 0, now).unwrap();
                let ok = m.fences.get(&key).is_none_or(|f| token >= *f);
                assert_eq!(got, ok, "IFGT {token} on {} with fence {:?}", FENCE_KEYS[key], m.fences.get(&key));
                if ok {
                    m.fences.insert(key, token);
                    m.values.insert(key, token);
                }
            }
            Op::DelFenced { key } => {
                store.dbs[0].remove(FENCE_KEYS[key].as_bytes(), now);
                m.values.remove(&key);
            }
        }
        // What the lock timer does at `now`, then the model's view of the same moment.
        engine::expire_due(&mut store, now);
        m.settle(now);
        for (i, key) in KEYS.iter().enumerate() {
            assert_eq!(snapshot(&store, key), m.locks.get(&i).cloned(), "{key} at {now}");
            assert_eq!(store.locks.live_waiters(0, key.as_bytes()), m.live_waiters(i), "waiters of {key}");
            if let Some(l) = m.locks.get(&i) {
                for h in &l.holders {
                    assert!(store.locks.timers.contains(&(h.1, 0, ruvio_server::keyspace::CompactBytes::new(key.as_bytes()))), "timer for {key}");
                }
            }
        }
        for (i, key) in FENCE_KEYS.iter().enumerate() {
            assert_eq!(store.locks.fence(0, key.as_bytes()), m.fences.get(&i).copied());
            assert_eq!(store.dbs[0].peek(key.as_bytes()).is_some(), m.values.contains_key(&i));
        }
    }
}

fn pick_token(holders: &[(i64, u64)], seen: &[i64], pick: usize) -> i64 {
    if !holders.is_empty() && pick % 4 != 0 {
        holders[pick % holders.len()].0
    } else if !seen.is_empty() && pick % 8 != 0 {
        seen[pick % seen.len()]
    } else {
        1 + (pick % 1000) as i64
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]
    #[test]
    fn engine_matches_the_model(ops in prop::collection::vec(op(), 1..80)) {
        run(ops);
    }
}
