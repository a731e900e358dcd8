//! Redis-style glob matching (`*`, `?`, `[a-z]`, `[^x]`, `\` escapes) for KEYS, SCAN MATCH, PSUBSCRIBE and
//! CONFIG GET. On a mismatch it backtracks only to the most recent `*`, so matching costs at most
//! O(pattern x subject) and no pattern can drive it exponential.

/// Matches one pattern element at `p` against byte `c`; returns (matched, length of the element in `pat`).
fn match_one(pat: &[u8], p: usize, c: u8, nocase: bool) -> (bool, usize) {
    let eq = |a: u8, b: u8| if nocase { a.eq_ignore_ascii_case(&b) } else { a == b };
    match pat[p] {
        b'?' => (true, 1),
        b'\\' if p + 1 < pat.len() => (eq(pat[p + 1], c), 2),
        b'[' => {
            let mut i = p + 1;
            let negate = i < pat.len() && pat[i] == b'^';
            if negate {
                i += 1;
            }
            let mut matched = false;
            while i < pat.len() && pat[i] != b']' {
                if pat[i] == b'\\' && i + 1 < pat.len() {
                    matched |= eq(pat[i + 1], c);
                    i += 2;
                } else if i + 2 < pat.len() && pat[i + 1] == b'-' && pat[i + 2] != b']' {
                    let (mut lo, mut hi) = (pat[i], pat[i + 2]);
                    if lo > hi {
                        std::mem::swap(&mut lo, &mut hi);
                    }
                    let cc = if nocase { c.to_ascii_lowercase() } else { c };
                    let (l2, h2) = if nocase { (lo.to_ascii_lowercase(), hi.to_ascii_lowercase()) } else { (lo, hi) };
                    matched |= (lo..=hi).contains(&c) || (l2..=h2).contains(&cc);
                    i += 3;
                } else {
                    matched |= eq(pat[i], c);
                    i += 1;
                }
            }
            // An unterminated class runs to the end of the pattern, as in Redis.
            let end = if i < pat.len() { i + 1 } else { i };
            (matched != negate, end - p)
        }
        other => (eq(other, c), 1),
    }
}

pub fn glob_match(pattern: &[u8], subject: &[u8], nocase: bool) -> bool {
    let (mut p, mut s) = (0usize, 0usize);
    // Where to resume after the latest '*': (pattern index after the star, subject index it consumed up to).
    let mut star: Option<(usize, usize)> = None;
    while s < subject.len() {
        if p < pattern.len() && pattern[p] == b'*' {
            while p < pattern.len() && pattern[p] == b'*' {
                p += 1;
            }
            if p == pattern.len() {
                return true;
            }
            star = Some((p, s));
            continue;
        }
        if p < pattern.len() {
            let (ok, len) = match_one(pattern, p, subject[s], nocase);
            if ok {
                p += len;
                s += 1;
                continue;
            }
        }
        match star {
            Some((sp, ss)) => {
                p = sp;
                s = ss + 1;
                star = Some((sp, ss + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::glob_match;

    #[test]
    fn redis_cases() {
        assert!(glob_match(b"*", b"", false));
        assert!(glob_match(b"h?llo", b"hello", false));
        assert!(glob_match(b"h*llo", b"heeeello", false));
        assert!(glob_match(b"h[ae]llo", b"hallo", false));
        assert!(!glob_match(b"h[^e]llo", b"hello", false));
        assert!(glob_match(b"h[a-b]llo", b"hbllo", false));
        assert!(glob_match(b"h\\*llo", b"h*llo", false));
        assert!(!glob_match(b"h\\*llo", b"hello", false));
        assert!(glob_match(b"user:*:name", b"user:42:name", false));
        assert!(!glob_match(b"user:*:name", b"user:42:names", false));
        assert!(glob_match(b"MAX*", b"maxclients", true));
    }

    #[test]
    fn adversarial_pattern_is_fast() {
        let pattern = b"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b";
        let subject = vec![b'a'; 10_000];
        let started = std::time::Instant::now();
        assert!(!glob_match(pattern, &subject, false));
        // Not a timing assertion on speed, a guard against exponential blow-up: exponential would not finish.
        assert!(started.elapsed().as_secs() < 10);
    }
}
