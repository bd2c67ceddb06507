//! Command lines from `/proc/PID/cmdline`, with secrets masked.
//!
//! A command line lands in a Prometheus label, the JSON API, the web view
//! and `gpuwatch status`, where everyone who can read those sees it, and
//! people pass passwords and tokens on command lines. So they are read only
//! when `sampler.process_command_line` is on, and then every value that
//! looks secret is replaced by [`MASK`] before the line leaves this module:
//!
//! ```text
//! --password=x  PASSWORD=x  --api-key=x  AWS_SECRET_ACCESS_KEY=x  -Ddb.pass=x   → NAME=***
//! --token x  --password x  (the next argument, unless it is a --long-option)   → --token ***
//! -p x  -px  (mysql and others; a port given as `-p 8080` is hidden too)      → -p ***  -p***
//! -u user:pass  --user user:pass  --user=user:pass  (curl)                     → -u user:***
//! scheme://user:pass@host  anywhere in an argument, any scheme                 → scheme://user:***@host
//! scheme://token@host                                                          → scheme://***@host
//! Authorization: Bearer x  (any case; also Basic, Digest, Token, Negotiate)    → Authorization: Bearer ***
//! Authorization: Other a b  (every word of the value but a scheme's name)      → Authorization: *** *** ***
//! bearer x  (any case)                                                         → bearer ***
//! ```
//!
//! A hidden value still counts for what follows it (`-p -Ddb.pass x` hides
//! `x` too).
//!
//! A name looks secret when one of its words (split at `-`, `_`, `.`, `;`
//! and other punctuation) contains `password`, `passwd`, `passphrase`,
//! `secret`, `credential`, `authorization` or `cookie`, ends in `token`,
//! `key`, `pwd` or `auth`, or is `pass` (`--max-tokens`, `--tokenizer`,
//! `--bypass-cache` and `--author` do not). Masking errs towards hiding.
//!
//! Arguments are separated by NULs. An argument holding spaces (`sh -c
//! "..."`, a process that rewrote its title) is also masked word by word;
//! `--password=two words` as one argument hides both words. Only the first
//! [`CMDLINE_READ_MAX`] bytes are read (the last, possibly cut, word is
//! dropped, so a secret cut before its end is not shown either), control
//! characters become `?`, and the result is cut at [`COMMAND_MAX_CHARS`].

use std::borrow::Cow;

/// Most bytes of `/proc/PID/cmdline` looked at; the kernel allows up to
/// 2 MiB of arguments, far more than [`COMMAND_MAX_CHARS`] can show.
pub const CMDLINE_READ_MAX: usize = 4096;

/// Longest command line kept, in characters.
pub const COMMAND_MAX_CHARS: usize = 256;

/// What a masked secret is shown as.
pub const MASK: &str = "***";

/// Authorization schemes: the word after one is the credential.
const AUTH_SCHEMES: [&str; 5] = ["bearer", "basic", "digest", "negotiate", "token"];

/// `/proc/PID/cmdline` (arguments separated by NULs) as one line with its
/// secrets masked, cut at [`COMMAND_MAX_CHARS`]; `None` when nothing is left
/// (kernel threads and zombies have an empty command line).
pub fn command_line(raw: &[u8]) -> Option<String> {
    let raw = if raw.len() > CMDLINE_READ_MAX {
        // The last word may be cut anywhere (a URL before its `@`): drop it.
        let head = &raw[..CMDLINE_READ_MAX];
        let end = head
            .iter()
            .rposition(|b| *b == 0 || b.is_ascii_whitespace())
            .unwrap_or(0);
        &head[..end]
    } else {
        raw
    };
    let text = String::from_utf8_lossy(raw);
    let mut masker = Masker::default();
    let mut words: Vec<Cow<'_, str>> = Vec::new();
    for arg in text.split('\0').filter(|a| !a.is_empty()) {
        masker.arg(arg, &mut words);
    }
    let joined = words.join(" ");
    if joined.is_empty() {
        return None;
    }
    Some(printable(&joined).chars().take(COMMAND_MAX_CHARS).collect())
}

/// `text` with control characters (terminal escapes, newlines) replaced by
/// `?`: what /proc says is shown in terminals and labels.
pub fn printable(text: &str) -> Cow<'_, str> {
    if text.chars().any(char::is_control) {
        Cow::Owned(
            text.chars()
                .map(|c| if c.is_control() { '?' } else { c })
                .collect(),
        )
    } else {
        Cow::Borrowed(text)
    }
}

/// What the words so far ask of the next one.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Pending {
    #[default]
    Nothing,
    /// It is a secret value (`--token X`).
    Secret,
    /// It may be `user:password` (`-u`): the password is hidden.
    UserPass,
    /// `Authorization:` ended an argument: the next argument is its value.
    Header,
    /// Inside an `Authorization:` value: every word but a scheme's name is
    /// hidden, up to a closing quote, a `-option` or the end of the
    /// argument.
    Credentials,
    /// As [`Pending::Credentials`], right after a scheme's name: when the
    /// argument ends here, the next one is the credential.
    Scheme,
}

/// Masks a command line argument by argument, remembering what an option
/// says about the argument after it.
#[derive(Debug, Default)]
struct Masker {
    pending: Pending,
}

impl Masker {
    /// Masks one NUL-separated argument into `out`.
    fn arg<'a>(&mut self, arg: &'a str, out: &mut Vec<Cow<'a, str>>) {
        // A value of the previous argument is hidden as a whole, spaces and all.
        let whole = match std::mem::take(&mut self.pending) {
            Pending::Secret if !arg.starts_with("--") => Some(Cow::Borrowed(MASK)),
            Pending::UserPass if is_user_pass(arg) => Some(user_pass(arg)),
            Pending::Header if !arg.starts_with('-') => {
                self.pending = Pending::Credentials;
                None
            }
            _ if short_p_attached(arg) => Some(Cow::Owned(format!("-p{MASK}"))),
            _ => mask_assignment(arg).map(Cow::Owned),
        };
        let hidden = whole.is_some();
        out.extend(whole);
        for word in arg.split_whitespace() {
            // A hidden value still says what comes next: `-p --password x`.
            let shown = self.word(word);
            if !hidden {
                out.push(shown);
            }
        }
        self.pending = match self.pending {
            Pending::Credentials => Pending::Nothing,
            Pending::Scheme => Pending::Secret,
            other => other,
        };
    }

    /// Masks one word of an argument.
    fn word<'a>(&mut self, word: &'a str) -> Cow<'a, str> {
        let lower = word.to_ascii_lowercase();
        let bare = lower.trim_matches(QUOTES);
        match std::mem::take(&mut self.pending) {
            Pending::Secret if !word.starts_with("--") => {
                // A hidden value still says what comes next: `-p -Dpass x`.
                self.plain_word(word, &lower);
                return Cow::Borrowed(MASK);
            }
            Pending::UserPass if is_user_pass(word) => return user_pass(word),
            // The credential after a scheme is hidden whatever it is; other
            // words of the value until one that looks like an option.
            pending @ (Pending::Header | Pending::Credentials | Pending::Scheme)
                if pending == Pending::Scheme || !word.starts_with('-') =>
            {
                let scheme = AUTH_SCHEMES.contains(&bare);
                if !word.ends_with(QUOTES) {
                    self.pending = if scheme {
                        Pending::Scheme
                    } else {
                        Pending::Credentials
                    };
                }
                return Cow::Borrowed(if scheme { word } else { MASK });
            }
            _ => {}
        }
        self.plain_word(word, &lower)
    }

    /// Masks a word that no word before it said anything about.
    fn plain_word<'a>(&mut self, word: &'a str, lower: &str) -> Cow<'a, str> {
        let bare = lower.trim_matches(QUOTES);
        if bare == "bearer" {
            self.pending = Pending::Secret;
            return Cow::Borrowed(word);
        }
        const HEADER: &str = "authorization:";
        if let Some(at) = lower.find(HEADER) {
            let end = at + HEADER.len();
            let rest = lower[end..].trim_matches(QUOTES);
            if rest.is_empty() {
                self.pending = Pending::Header;
            } else if !word.ends_with(QUOTES) {
                self.pending = Pending::Credentials;
            }
            return if rest.is_empty() || AUTH_SCHEMES.contains(&rest) {
                Cow::Borrowed(word)
            } else {
                Cow::Owned(format!("{}{MASK}", &word[..end]))
            };
        }
        if word == "-p" {
            self.pending = Pending::Secret;
            return Cow::Borrowed(word);
        }
        if short_p_attached(word) {
            return Cow::Owned(format!("-p{MASK}"));
        }
        if word == "-u" || lower == "--user" {
            self.pending = Pending::UserPass;
            return Cow::Borrowed(word);
        }
        if let Some(masked) = mask_assignment(word) {
            return Cow::Owned(masked);
        }
        if word.starts_with('-') && !word.contains('=') && looks_secret(word) {
            self.pending = Pending::Secret;
            return Cow::Borrowed(word);
        }
        mask_urls(word)
    }
}

/// Quotes around a word of a shell snippet.
const QUOTES: [char; 2] = ['\'', '"'];

/// `-pSECRET` (mysql's password, attached).
fn short_p_attached(word: &str) -> bool {
    word.len() > 2 && word.starts_with("-p")
}

/// Whether the value of `-u` is `user:password` (not an option, not
/// `Authorization:`, not `NAME=value`).
fn is_user_pass(value: &str) -> bool {
    !value.starts_with('-')
        && value
            .split_once(':')
            .is_some_and(|(user, password)| !user.contains('=') && !password.is_empty())
        && !value.contains(char::is_whitespace)
}

/// `user:password` with the password hidden.
fn user_pass(value: &str) -> Cow<'_, str> {
    match value.split_once(':') {
        Some((user, _)) => Cow::Owned(format!("{user}:{MASK}")),
        None => Cow::Borrowed(value),
    }
}

/// `NAME=value` where a name (any of `a=b=c`'s) looks secret: the text up
/// to that `=` (its URLs masked) and [`MASK`]; `--user=user:pass` with the
/// password hidden. `None` when no name looks secret or a name holds
/// whitespace (then the text is a shell snippet, masked word by word).
fn mask_assignment(text: &str) -> Option<String> {
    let mut start = 0;
    for (at, _) in text.match_indices('=') {
        let name = &text[start..at];
        if name.contains(char::is_whitespace) {
            return None;
        }
        if looks_secret(name) {
            return Some(format!("{}{MASK}", mask_urls(&text[..=at])));
        }
        if name.eq_ignore_ascii_case("--user") && text[at + 1..].contains(':') {
            return Some(format!("{}{}", &text[..=at], user_pass(&text[at + 1..])));
        }
        start = at + 1;
    }
    None
}

/// The user information of every `scheme://user:password@host` in `word`
/// masked: the password, or the whole user part where it has no `:` (a
/// token used as the user name). The last `@` ends the user information,
/// so a password holding `@` or `/` is hidden whole.
fn mask_urls(word: &str) -> Cow<'_, str> {
    if !word.contains("://") {
        return Cow::Borrowed(word);
    }
    let mut out = String::with_capacity(word.len());
    let mut rest = word;
    while let Some(found) = rest.find("://") {
        let (head, tail) = rest.split_at(found + 3);
        out.push_str(head);
        rest = tail;
        let Some(at) = tail.rfind('@') else {
            continue;
        };
        let info = &tail[..at];
        if let Some(colon) = info.find(':') {
            out.push_str(&info[..=colon]);
            out.push_str(MASK);
        } else if info.is_empty() || info.contains(['/', '?', '#']) {
            // Not user information: a path or query holding an `@`.
            out.push_str(info);
        } else {
            out.push_str(MASK);
        }
        out.push('@');
        rest = &tail[at + 1..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Whether an option or variable name suggests its value is a secret
/// (`--password`, `--api-token`, `AWS_SECRET_ACCESS_KEY`, `--mysql-pwd`).
fn looks_secret(name: &str) -> bool {
    const CONTAINS: [&str; 7] = [
        "password",
        "passwd",
        "passphrase",
        "secret",
        "credential",
        "authorization",
        "cookie",
    ];
    const ENDS: [&str; 4] = ["token", "key", "pwd", "auth"];
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|word| !word.is_empty())
        .any(|word| {
            let word = word.to_ascii_lowercase();
            word == "pass"
                || CONTAINS.iter().any(|s| word.contains(s))
                || ENDS.iter().any(|s| word.ends_with(s))
        })
}

#[cfg(test)]
mod tests;
