//! Text from outside (kernel-log lines, process names) shown on a terminal
//! or in the agent's log: control characters (ESC, BEL, the C1 range that
//! opens OSC sequences) are written as escapes, so a hostile line cannot
//! move the cursor, retitle the terminal or forge a log line.

use std::borrow::Cow;

/// `text` with every control character written as `\u{..}` (newline and tab
/// too: one value stays one line); unchanged, and not copied, when it has
/// none.
pub fn control_chars(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_the_rest_kept() {
        assert!(matches!(control_chars("Xid 79 ümlaut"), Cow::Borrowed(_)));
        assert_eq!(
            control_chars("a\u{1b}]0;owned\u{7}b\nc\u{9b}d"),
            "a\\u{1b}]0;owned\\u{7}b\\u{a}c\\u{9b}d"
        );
    }
}
