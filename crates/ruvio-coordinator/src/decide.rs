//! Who to promote, or why not: the failover rule as a pure function (unit-tested below).
//!
//! With durability level n and D the replicas that count for durability (R = |D|), a durable write was fsynced by
//! n members of D. Any R-n+1 members of D share at least one member with every such set of n, so once R-n+1
//! members promised the new epoch (and stopped acknowledging the old primary), the promised member with the
//! highest fsynced LSN holds every durable write. Fewer promises: wait (or an operator forces it).

/// A replica's answer to `REPLICATION PROMISE <epoch>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Promise {
    pub promised_epoch: u64,
    pub lsn: u64,
    pub fsynced_lsn: u64,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub addr: String,
    /// Answered recently and reports itself a replica.
    pub reachable: bool,
    /// Replication offset (an LSN on Ruvio nodes).
    pub offset: u64,
    /// Set when the replica promised (n >= 1 only).
    pub promise: Option<Promise>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Promote { addr: String, note: String },
    Wait { reason: String },
}

fn best_by_offset(c: &[&Candidate]) -> Option<String> {
    c.iter().max_by(|a, b| a.offset.cmp(&b.offset).then_with(|| b.addr.cmp(&a.addr))).map(|c| c.addr.clone())
}

fn best_by_fsynced(c: &[(&Candidate, Promise)]) -> Option<(String, Promise)> {
    c.iter()
        .max_by(|(a, pa), (b, pb)| {
            pa.fsynced_lsn.cmp(&pb.fsynced_lsn).then(pa.lsn.cmp(&pb.lsn)).then_with(|| b.addr.cmp(&a.addr))
        })
        .map(|(c, p)| (c.addr.clone(), *p))
}

/// Decides the promotion for a failover at `epoch`.
/// - `n`: the durability level; `d`: the durability set D (addresses);
/// - `candidates`: the replicas (every member of D should be among them, reachable or not);
/// - `force`: the operator accepts losing what the rule cannot guarantee.
pub fn decide(n: u32, epoch: u64, d: &[String], candidates: &[Candidate], force: bool) -> Decision {
    let reachable: Vec<&Candidate> = candidates.iter().filter(|c| c.reachable).collect();
    if n == 0 {
        return match best_by_offset(&reachable) {
            Some(addr) => Decision::Promote {
                addr,
                note: "asynchronous replication (n=0): the reachable replica with the highest offset; writes it had not received are lost".into(),
            },
            None => Decision::Wait { reason: "no reachable replica to promote".into() },
        };
    }
    let r = d.len();
    let in_d = |c: &&Candidate| d.contains(&c.addr);
    if let Some(c) = candidates.iter().filter(in_d).find(|c| c.promise.is_some_and(|p| p.promised_epoch > epoch)) {
        return Decision::Wait {
            reason: format!("{} promised a newer epoch {} than this attempt's {epoch}; a later failover owns the group", c.addr, c.promise.unwrap().promised_epoch),
        };
    }
    let promised: Vec<(&Candidate, Promise)> = candidates
        .iter()
        .filter(in_d)
        .filter_map(|c| c.promise.filter(|p| p.promised_epoch == epoch).map(|p| (c, p)))
        .collect();
    let k = promised.len();
    let n_us = n as usize;
    if r >= n_us {
        let need = r - n_us + 1;
        if k >= need {
            let (addr, p) = best_by_fsynced(&promised).expect("k >= 1");
            return Decision::Promote {
                addr: addr.clone(),
                note: format!(
                    "{k} of {r} durability replicas promised epoch {epoch} (rule: R-n+1 = {need}); {addr} has the highest fsynced LSN {}",
                    p.fsynced_lsn
                ),
            };
        }
    }
    let unpromised: Vec<&str> =
        d.iter().filter(|a| !promised.iter().any(|(c, _)| c.addr == **a)).map(|s| s.as_str()).collect();
    let why = if r < n_us {
        format!("durability level n={n} but only {r} durability replicas are known (D = [{}])", d.join(", "))
    } else {
        format!(
            "only {k} of {r} durability replicas promised epoch {epoch}; the rule needs R-n+1 = {} (unreachable or refusing: {})",
            r - n_us + 1,
            unpromised.join(", ")
        )
    };
    if !force {
        return Decision::Wait { reason: format!("{why}; waiting (SENTINEL FAILOVER <name> FORCE promotes anyway and may lose durable writes)") };
    }
    let loss = if unpromised.len() >= n_us {
        format!(
            "a durable write acknowledged by {n} of the unpromised replicas [{}] alone may be lost",
            unpromised.join(", ")
        )
    } else {
        "no durable write can be lost".to_string()
    };
    if let Some((addr, p)) = best_by_fsynced(&promised) {
        return Decision::Promote {
            addr,
            note: format!("FORCED by the operator: {why}; promoted the promised replica with fsynced LSN {}; {loss}", p.fsynced_lsn),
        };
    }
    match best_by_offset(&reachable) {
        Some(addr) => Decision::Promote {
            addr,
            note: format!("FORCED by the operator: {why}; no replica promised, promoted the reachable one with the highest offset; {loss}, and the old primary was not fenced"),
        },
        None => Decision::Wait { reason: format!("{why}; and no replica is reachable, even forced") },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cand(addr: &str, reachable: bool, promise: Option<(u64, u64, u64)>) -> Candidate {
        Candidate {
            addr: addr.into(),
            reachable,
            offset: promise.map_or(0, |p| p.1),
            promise: promise.map(|(e, l, f)| Promise { promised_epoch: e, lsn: l, fsynced_lsn: f }),
        }
    }
    fn d(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn async_promotes_highest_offset_among_reachable() {
        let c = vec![
            Candidate { addr: "a".into(), reachable: true, offset: 10, promise: None },
            Candidate { addr: "b".into(), reachable: true, offset: 30, promise: None },
            Candidate { addr: "c".into(), reachable: false, offset: 99, promise: None },
        ];
        assert!(matches!(decide(0, 2, &[], &c, false), Decision::Promote { addr, .. } if addr == "b"));
        let none = vec![Candidate { addr: "c".into(), reachable: false, offset: 99, promise: None }];
        assert!(matches!(decide(0, 2, &[], &none, false), Decision::Wait { .. }));
    }

    #[test]
    fn n1_r2_needs_two_promises() {
        // R = 2, n = 1: a durable write may sit on either one, so both must promise.
        let dd = d(&["a", "b"]);
        let one = vec![cand("a", true, Some((5, 100, 100))), cand("b", false, None)];
        match decide(1, 5, &dd, &one, false) {
            Decision::Wait { reason } => assert!(reason.contains("only 1 of 2") && reason.contains("needs R-n+1 = 2") && reason.contains('b'), "{reason}"),
            other => panic!("must wait, got {other:?}"),
        }
        let both = vec![cand("a", true, Some((5, 100, 90))), cand("b", true, Some((5, 95, 95)))];
        // The promised one with the highest fsynced LSN, not the highest received LSN.
        assert!(matches!(decide(1, 5, &dd, &both, false), Decision::Promote { addr, .. } if addr == "b"));
    }

    #[test]
    fn n1_r3_needs_three_n2_r3_needs_two() {
        let dd = d(&["a", "b", "c"]);
        let two = vec![cand("a", true, Some((7, 10, 10))), cand("b", true, Some((7, 12, 12))), cand("c", false, None)];
        assert!(matches!(decide(1, 7, &dd, &two, false), Decision::Wait { .. }));
        assert!(matches!(decide(2, 7, &dd, &two, false), Decision::Promote { addr, .. } if addr == "b"));
        // n = R = 3: a durable write is on every member, so one promise is enough.
        assert!(matches!(decide(3, 7, &dd, &two, false), Decision::Promote { addr, .. } if addr == "b"));
        assert!(matches!(decide(4, 7, &dd, &two, false), Decision::Wait { .. }));
        let one = vec![cand("a", true, Some((7, 10, 10))), cand("b", false, None), cand("c", false, None)];
        assert!(matches!(decide(3, 7, &dd, &one, false), Decision::Promote { addr, .. } if addr == "a"));
        assert!(matches!(decide(2, 7, &dd, &one, false), Decision::Wait { .. }));
    }

    #[test]
    fn promises_outside_d_or_of_other_epochs_do_not_count() {
        let dd = d(&["a", "b"]);
        let c = vec![cand("a", true, Some((4, 10, 10))), cand("b", true, Some((5, 10, 10))), cand("x", true, Some((5, 50, 50)))];
        // a promised an older epoch, x is not in D: only b counts, need 2.
        assert!(matches!(decide(1, 5, &dd, &c, false), Decision::Wait { .. }));
        // A member that promised a newer epoch means this attempt is stale.
        let newer = vec![cand("a", true, Some((6, 10, 10))), cand("b", true, Some((5, 10, 10)))];
        match decide(1, 5, &dd, &newer, true) {
            Decision::Wait { reason } => assert!(reason.contains("newer epoch")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn n_larger_than_d_waits() {
        let c = vec![cand("a", true, Some((3, 1, 1)))];
        match decide(2, 3, &d(&["a"]), &c, false) {
            Decision::Wait { reason } => assert!(reason.contains("only 1 durability replicas")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn force_promotes_and_says_what_may_be_lost() {
        let dd = d(&["a", "b", "c"]);
        let c = vec![cand("a", true, Some((9, 10, 8))), cand("b", false, None), cand("c", false, None)];
        match decide(1, 9, &dd, &c, true) {
            Decision::Promote { addr, note } => {
                assert_eq!(addr, "a");
                assert!(note.contains("FORCED") && note.contains("may be lost") && note.contains("b, c"), "{note}");
            }
            other => panic!("{other:?}"),
        }
        // Nothing promised at all: the reachable replica with the highest offset, and the note says so.
        let c = vec![
            Candidate { addr: "a".into(), reachable: true, offset: 3, promise: None },
            Candidate { addr: "b".into(), reachable: true, offset: 4, promise: None },
        ];
        match decide(1, 9, &d(&["a", "b"]), &c, true) {
            Decision::Promote { addr, note } => assert!(addr == "b" && note.contains("not fenced")),
            other => panic!("{other:?}"),
        }
    }
}
