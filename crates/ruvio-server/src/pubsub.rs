//! Pub/sub routing: channel and pattern subscriptions, delivery into each subscriber's bounded [`Outbox`].

use std::collections::HashMap;
use std::sync::Arc;

use bytes::{Bytes, BytesMut};
use ruvio_protocol::{encode, Protocol, Value};

use crate::client::ClientInfo;
use crate::config::OutputLimit;
use crate::keyspace::glob::glob_match;

#[derive(Default)]
pub struct PubSub {
    channels: HashMap<Bytes, HashMap<u64, Arc<ClientInfo>>>,
    patterns: HashMap<Bytes, HashMap<u64, Arc<ClientInfo>>>,
    /// Shard channels (SSUBSCRIBE, SPUBLISH): without a cluster, a namespace of their own, as in Redis.
    shard_channels: HashMap<Bytes, HashMap<u64, Arc<ClientInfo>>>,
}

fn message(kind: &'static str, parts: Vec<Bytes>, proto: Protocol) -> Bytes {
    let mut items = vec![Value::bulk(Bytes::from_static(kind.as_bytes()))];
    items.extend(parts.into_iter().map(Value::Bulk));
    let v = if proto == Protocol::Resp3 { Value::Push(items) } else { Value::Array(items) };
    let mut buf = BytesMut::new();
    encode(&v, proto, &mut buf);
    buf.freeze()
}

impl PubSub {
    /// Subscribes; true if it was not subscribed already.
    pub fn subscribe(&mut self, channel: Bytes, client: &Arc<ClientInfo>) -> bool {
        self.channels.entry(channel).or_default().insert(client.id, client.clone()).is_none()
    }

    pub fn unsubscribe(&mut self, channel: &[u8], client_id: u64) -> bool {
        let Some(subs) = self.channels.get_mut(channel) else { return false };
        let removed = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            self.channels.remove(channel);
        }
        removed
    }

    pub fn ssubscribe(&mut self, channel: Bytes, client: &Arc<ClientInfo>) -> bool {
        self.shard_channels.entry(channel).or_default().insert(client.id, client.clone()).is_none()
    }

    pub fn sunsubscribe(&mut self, channel: &[u8], client_id: u64) -> bool {
        let Some(subs) = self.shard_channels.get_mut(channel) else { return false };
        let removed = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            self.shard_channels.remove(channel);
        }
        removed
    }

    pub fn psubscribe(&mut self, pattern: Bytes, client: &Arc<ClientInfo>) -> bool {
        self.patterns.entry(pattern).or_default().insert(client.id, client.clone()).is_none()
    }

    pub fn punsubscribe(&mut self, pattern: &[u8], client_id: u64) -> bool {
        let Some(subs) = self.patterns.get_mut(pattern) else { return false };
        let removed = subs.remove(&client_id).is_some();
        if subs.is_empty() {
            self.patterns.remove(pattern);
        }
        removed
    }

    /// SPUBLISH: delivers `payload` (`smessage`) to the shard channel's subscribers only; as [`PubSub::publish`].
    pub fn spublish(&self, channel: &Bytes, payload: &Bytes, limit: &OutputLimit) -> (i64, u64) {
        let (mut delivered, mut dropped) = (0, 0);
        let mut cache: [Option<Bytes>; 2] = [None, None];
        for c in self.shard_channels.get(channel).into_iter().flat_map(|s| s.values()) {
            let proto = if c.resp.load(std::sync::atomic::Ordering::Relaxed) == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
            let msg = cache[(proto == Protocol::Resp3) as usize].get_or_insert_with(|| message("smessage", vec![channel.clone(), payload.clone()], proto)).clone();
            if !c.is_killed() && !c.outbox.push(msg, limit) {
                c.kill();
                dropped += 1;
            }
            delivered += 1;
        }
        (delivered, dropped)
    }

    pub fn shard_channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.shard_channels.keys().filter(|c| pattern.is_none_or(|p| glob_match(p, c, false))).cloned().collect()
    }

    pub fn shard_numsub(&self, channel: &[u8]) -> usize {
        self.shard_channels.get(channel).map_or(0, |s| s.len())
    }

    /// Delivers `payload` to every subscriber; returns how many received it. Subscribers whose output buffer went
    /// over `limit` are disconnected.
    pub fn publish(&self, channel: &Bytes, payload: &Bytes, limit: &OutputLimit) -> (i64, u64) {
        let mut delivered = 0;
        let mut dropped = 0;
        // Encode once per protocol version, not once per subscriber.
        let mut cache: [Option<Bytes>; 2] = [None, None];
        let mut deliver = |client: &Arc<ClientInfo>, make: &dyn Fn(Protocol) -> Bytes, cache: &mut [Option<Bytes>; 2]| {
            let proto = if client.resp.load(std::sync::atomic::Ordering::Relaxed) == 3 { Protocol::Resp3 } else { Protocol::Resp2 };
            let slot = &mut cache[(proto == Protocol::Resp3) as usize];
            let msg = slot.get_or_insert_with(|| make(proto)).clone();
            if !client.is_killed() && !client.outbox.push(msg, limit) {
                client.kill();
                dropped += 1;
            }
            delivered += 1;
        };
        if let Some(subs) = self.channels.get(channel) {
            let make = |p| message("message", vec![channel.clone(), payload.clone()], p);
            for c in subs.values() {
                deliver(c, &make, &mut cache);
            }
        }
        for (pattern, subs) in &self.patterns {
            if glob_match(pattern, channel, false) {
                let mut pcache = [None, None];
                let make = |p| message("pmessage", vec![pattern.clone(), channel.clone(), payload.clone()], p);
                for c in subs.values() {
                    deliver(c, &make, &mut pcache);
                }
            }
        }
        (delivered, dropped)
    }

    /// Calls `f(name, is_pattern, subscriber)` for every subscription (the ACL's revocation check).
    pub fn for_each_subscription(&self, mut f: impl FnMut(&Bytes, bool, &Arc<ClientInfo>)) {
        for (name, subs) in &self.channels {
            subs.values().for_each(|c| f(name, false, c));
        }
        for (name, subs) in &self.patterns {
            subs.values().for_each(|c| f(name, true, c));
        }
        for (name, subs) in &self.shard_channels {
            subs.values().for_each(|c| f(name, false, c));
        }
    }

    pub fn channels(&self, pattern: Option<&[u8]>) -> Vec<Bytes> {
        self.channels.keys().filter(|c| pattern.is_none_or(|p| glob_match(p, c, false))).cloned().collect()
    }

    pub fn numsub(&self, channel: &[u8]) -> usize {
        self.channels.get(channel).map_or(0, |s| s.len())
    }

    pub fn numpat(&self) -> usize {
        self.patterns.len()
    }

    /// Builds the reply for a (un)subscribe confirmation.
    pub fn confirmation(kind: &'static str, name: Option<Bytes>, count: usize, proto: Protocol) -> Value {
        let items = vec![
            Value::bulk(Bytes::from_static(kind.as_bytes())),
            name.map_or(Value::Nil, Value::Bulk),
            Value::Integer(count as i64),
        ];
        if proto == Protocol::Resp3 { Value::Push(items) } else { Value::Array(items) }
    }
}
