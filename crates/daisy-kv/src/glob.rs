//! Redis's glob patterns (KEYS, SCAN MATCH, CONFIG GET): `*`, `?`, `[abc]`, `[^a]`, `[a-z]`,
//! and `\x` to match `x` literally. Matching is on bytes, like Redis's stringmatchlen.

/// Does `s` match `pat`? Iterative with one backtrack point for the last `*` (linear in
/// practice, never exponential).
pub fn matches(pat: &[u8], s: &[u8]) -> bool {
    let (mut p, mut i) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while i < s.len() {
        if p < pat.len() {
            match pat[p] {
                b'*' => {
                    while p < pat.len() && pat[p] == b'*' {
                        p += 1;
                    }
                    if p == pat.len() {
                        return true;
                    }
                    star = Some((p, i));
                    continue;
                }
                b'?' => {
                    p += 1;
                    i += 1;
                    continue;
                }
                b'[' => {
                    if let Some((ok, next)) = class(pat, p, s[i]) {
                        if ok {
                            p = next;
                            i += 1;
                            continue;
                        }
                    }
                }
                b'\\' if p + 1 < pat.len() => {
                    if pat[p + 1] == s[i] {
                        p += 2;
                        i += 1;
                        continue;
                    }
                }
                c => {
                    if c == s[i] {
                        p += 1;
                        i += 1;
                        continue;
                    }
                }
            }
        }
        // Mismatch: let the last `*` swallow one more byte, or fail.
        match star {
            Some((sp, si)) => {
                p = sp;
                i = si + 1;
                star = Some((sp, si + 1));
            }
            None => return false,
        }
    }
    pat[p..].iter().all(|&c| c == b'*')
}

/// Match byte `c` against the class starting at `pat[p] == '['`: (matched, index after `]`).
/// An unterminated class runs to the pattern's end, as in Redis.
fn class(pat: &[u8], p: usize, c: u8) -> Option<(bool, usize)> {
    let mut j = p + 1;
    let negate = j < pat.len() && pat[j] == b'^';
    if negate {
        j += 1;
    }
    let mut hit = false;
    while j < pat.len() && pat[j] != b']' {
        if pat[j] == b'\\' && j + 1 < pat.len() {
            hit |= pat[j + 1] == c;
            j += 2;
        } else if j + 2 < pat.len() && pat[j + 1] == b'-' {
            // As Redis: a range whenever two bytes follow the '-', even when the second is
            // the ']' (so `[1-]` is the range '1'..=']' and the class is left unterminated).
            let (lo, hi) = (pat[j].min(pat[j + 2]), pat[j].max(pat[j + 2]));
            hit |= lo <= c && c <= hi;
            j += 3;
        } else {
            hit |= pat[j] == c;
            j += 1;
        }
    }
    let next = if j < pat.len() { j + 1 } else { j };
    Some((hit != negate, next))
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn redis_glob_cases() {
        let yes = [
            ("*", ""),
            ("*", "abc"),
            ("h?llo", "hello"),
            ("h*llo", "heeeello"),
            ("h[ae]llo", "hallo"),
            ("h[^e]llo", "hallo"),
            ("h[a-b]llo", "hbllo"),
            ("key:*", "key:000001"),
            ("*:1*", "key:123"),
            ("a\\*b", "a*b"),
            ("*a*b*", "xxaxxbxx"),
            ("k[1-]", "k5"),
            ("k[1-]", "k]"),
            ("k[1", "k1"),
        ];
        let no = [
            ("h?llo", "hllo"),
            ("h[ae]llo", "hillo"),
            ("h[^e]llo", "hello"),
            ("key:*", "ke"),
            ("a\\*b", "axb"),
            ("", "a"),
            ("*a*b", "xxaxxbx"),
            ("k[1-]", "k0"),
            ("k[1-]", "k1]"),
        ];
        for (p, s) in yes {
            assert!(matches(p.as_bytes(), s.as_bytes()), "{p} should match {s}");
        }
        for (p, s) in no {
            assert!(
                !matches(p.as_bytes(), s.as_bytes()),
                "{p} should not match {s}"
            );
        }
    }
}
