//! Text that came from another cluster (a cluster name in a TXT record or an `/ids` answer, a
//! message its API server wrote) made safe to print on a terminal: control characters are
//! shown as escapes instead of being sent, so a hostile peer cannot move the cursor, clear the
//! screen, retitle the window or hide a line of what the user reads.

use std::borrow::Cow;

/// Whether `s` holds no control character (C0 — ESC, BEL, CR, newline… —, DEL or C1): what a
/// name from a peer must be before it goes into an object.
pub fn is_printable(s: &str) -> bool {
    !s.chars().any(char::is_control)
}

/// `s` with every control character shown as a visible escape: `\x1b`, `\u{9b}`.
pub fn printable(s: &str) -> Cow<'_, str> {
    if is_printable(s) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        match c {
            c if c.is_control() && (c as u32) < 0x80 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if c.is_control() => out.push_str(&format!("\\u{{{:x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_shown_not_sent() {
        assert!(matches!(printable("beta ✓ 9a596a4b"), Cow::Borrowed(_)), "plain text is left alone");
        assert!(is_printable("beta ✓") && !is_printable("beta\x1b[2J") && !is_printable("a\u{9b}"));
        assert_eq!(printable("\x1b]0;pwned\x07\x1b[2Jname"), "\\x1b]0;pwned\\x07\\x1b[2Jname");
        assert_eq!(printable("a\nb\rc\td\x7f"), "a\\x0ab\\x0dc\\x09d\\x7f");
        assert_eq!(printable("\u{9b}31m"), "\\u{9b}31m");
    }
}
