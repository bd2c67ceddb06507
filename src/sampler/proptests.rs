//! Property tests for what the sampler parses from /proc: command lines
//! (and their masking), `status` uids, passwd files and cgroup paths. A
//! process chooses its own name and arguments, so these parsers read
//! hostile input: any bytes must give a bounded answer, never a panic.

use proptest::prelude::*;

use super::cgroup::{self, CONTAINER_ID_MAX};
use super::cmdline::{command_line, CMDLINE_READ_MAX, COMMAND_MAX_CHARS};
use super::procnames::{parse_passwd, real_uid};

/// Marks every generated secret, so a leaked piece of one is found.
const MARK: &str = "Z9Q";

/// A secret: the mark, then printable characters that are not whitespace.
fn secret() -> impl Strategy<Value = String> {
    "[!-~à-ÿ]{0,40}".prop_map(|tail| format!("{MARK}{tail}"))
}

/// Arguments a secret may sit among, the tricky ones included.
fn neighbour() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9./_=-]{1,12}",
        prop::sample::select(vec![
            "-p",
            "-u",
            "--user",
            "--token",
            "--password",
            "Authorization:",
            "bearer",
            "Basic",
            "sh",
            "-c",
            "x=y",
            "--conf=a.b",
            "https://h/x@y",
            "-pthread",
            "--",
            "'",
        ])
        .prop_map(str::to_string),
    ]
}

/// `args` as /proc/PID/cmdline holds them.
fn raw(args: &[String]) -> Vec<u8> {
    args.iter()
        .flat_map(|a| a.bytes().chain(std::iter::once(0)))
        .collect()
}

/// A command line with `secret_arg` among `before` and `after`, as
/// separate arguments or as one shell snippet (`sh -c "..."`).
fn command_with(before: &[String], secret_arg: String, after: &[String], snippet: bool) -> Vec<u8> {
    let mut args: Vec<String> = before.to_vec();
    args.push(secret_arg);
    args.extend_from_slice(after);
    if snippet {
        let joined = args.join(" ");
        args = vec!["sh".into(), "-c".into(), joined];
    }
    raw(&args)
}

fn assert_hidden(line: &str, secret: &str) -> Result<(), TestCaseError> {
    prop_assert!(!line.contains(secret), "secret {secret:?} shown: {line:?}");
    prop_assert!(!line.contains(MARK), "part of {secret:?} shown: {line:?}");
    Ok(())
}

proptest! {
    // Up to a megabyte each: fewer cases.
    #![proptest_config(ProptestConfig::with_cases(32))]

    #[test]
    fn a_huge_cmdline_is_cut_to_the_bound(
        pattern in prop::collection::vec(any::<u8>(), 1..64),
        len in 0usize..(1 << 20),
    ) {
        let bytes: Vec<u8> = pattern.iter().copied().cycle().take(len).collect();
        if let Some(line) = command_line(&bytes) {
            prop_assert!(line.chars().count() <= COMMAND_MAX_CHARS);
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_cmdline_bytes_give_a_bounded_printable_line(
        bytes in prop::collection::vec(any::<u8>(), 0..2 * CMDLINE_READ_MAX),
    ) {
        if let Some(line) = command_line(&bytes) {
            prop_assert!(!line.is_empty());
            prop_assert!(line.chars().count() <= COMMAND_MAX_CHARS);
            prop_assert!(!line.chars().any(char::is_control), "{line:?}");
        }
    }

    #[test]
    fn a_password_option_never_shows_its_value(
        before in prop::collection::vec(neighbour(), 0..4),
        after in prop::collection::vec(neighbour(), 0..3),
        secret in secret(),
        name in prop::sample::select(vec![
            "--password", "--pass", "--auth", "--api-key", "--mysql-pwd", "password",
            "AWS_SECRET_ACCESS_KEY", "-Ddb.password", "--client-secret", "--hf-token",
        ]),
        attached in any::<bool>(),
        snippet in any::<bool>(),
    ) {
        // `NAME SECRET` is how options are written, not variables.
        let attached = attached || !name.starts_with('-');
        let arg = if attached { format!("{name}={secret}") } else { format!("{name} {secret}") };
        let (before, arg) = if attached || snippet {
            (before, arg)
        } else {
            // `--password SECRET`: two arguments.
            let mut before = before;
            before.push(name.to_string());
            (before, secret.clone())
        };
        let line = command_line(&command_with(&before, arg, &after, snippet)).unwrap_or_default();
        assert_hidden(&line, &secret)?;
    }

    #[test]
    fn a_url_never_shows_its_password(
        before in prop::collection::vec(neighbour(), 0..4),
        after in prop::collection::vec(neighbour(), 0..3),
        scheme in "[a-z][a-z0-9+.-]{0,10}",
        user in "[A-Za-z0-9._-]{0,8}",
        secret in secret(),
        host in "[a-z0-9.-]{1,12}(:[0-9]{1,5})?(/[a-z0-9/]{0,8})?",
        option in prop::option::of("--[a-z-]{1,8}="),
        snippet in any::<bool>(),
    ) {
        let url = format!("{}{scheme}://{user}:{secret}@{host}", option.unwrap_or_default());
        let line = command_line(&command_with(&before, url, &after, snippet)).unwrap_or_default();
        assert_hidden(&line, &secret)?;
    }

    #[test]
    fn a_bearer_token_is_never_shown(
        before in prop::collection::vec(neighbour(), 0..3),
        secret in secret(),
        scheme in "(?i)(bearer|basic|token)",
        header in prop::sample::select(vec!["Authorization:", "authorization:", "", "--header=Authorization:"]),
        snippet in any::<bool>(),
    ) {
        // With no header only "bearer" announces a token.
        prop_assume!(!header.is_empty() || scheme.eq_ignore_ascii_case("bearer"));
        let words = [header.to_string(), scheme, secret.clone()];
        let arg = words.iter().filter(|w| !w.is_empty()).cloned().collect::<Vec<_>>().join(" ");
        let line = command_line(&command_with(&before, arg, &[], snippet)).unwrap_or_default();
        assert_hidden(&line, &secret)?;
    }

    #[test]
    fn any_status_text_gives_a_uid_or_none(text in "(?s).{0,400}") {
        let _ = real_uid(&text);
    }

    #[test]
    fn the_real_uid_is_found_among_other_lines(
        uid in any::<u32>(),
        others in prop::collection::vec("[A-Za-z]{1,10}:\t[ -~]{0,20}", 0..8),
        name in "[^\n]{0,20}",
    ) {
        let mut status = format!("Name:\t{name}\n");
        for line in others.iter().filter(|l| !l.starts_with("Uid:")) {
            status.push_str(line);
            status.push('\n');
        }
        status.push_str(&format!("Uid:\t{uid}\t0\t0\t0\nGid:\t0\t0\t0\t0\n"));
        prop_assert_eq!(real_uid(&status), Some(uid));
    }

    #[test]
    fn any_passwd_text_gives_at_most_one_user_per_line(text in "(?s).{0,2000}") {
        let users = parse_passwd(&text);
        prop_assert!(users.len() <= text.lines().count());
        prop_assert!(users.values().all(|name| !name.is_empty() && !name.contains(':')));
    }

    #[test]
    fn any_cgroup_text_gives_a_bounded_container_or_none(
        text in prop_oneof!["(?s).{0,600}", "([0-9]{1,2}:[a-z,=]{0,12}:(/[a-z0-9_.@-]{0,70}){0,6}\n){0,4}"],
    ) {
        if let Some(container) = cgroup::parse(&text) {
            prop_assert!((32..=CONTAINER_ID_MAX).contains(&container.id.len()), "{:?}", container.id);
            prop_assert!(container.id.bytes().all(|b| b.is_ascii_hexdigit()));
            if let Some(uid) = &container.pod_uid {
                prop_assert_eq!(uid.len(), 36);
            }
        }
    }

    #[test]
    fn a_pod_and_container_are_found_in_any_layout(
        id in "[0-9a-f]{64}",
        uid in "[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}",
        qos in prop::sample::select(vec!["burstable", "besteffort"]),
        runtime in prop::sample::select(vec!["cri-containerd", "crio", "docker"]),
        systemd in any::<bool>(),
        junk in prop::collection::vec("[0-9]{1,2}:[a-z]{1,8}:/[a-z.]{0,20}\n", 0..4),
    ) {
        let line = if systemd {
            let uid_ = uid.replace('-', "_");
            format!("0::/kubepods.slice/kubepods-{qos}.slice/kubepods-{qos}-pod{uid_}.slice/{runtime}-{id}.scope\n")
        } else {
            format!("0::/kubepods/{qos}/pod{uid}/{id}\n")
        };
        let text = junk.concat() + &line;
        let Some(container) = cgroup::parse(&text) else {
            return Err(TestCaseError::fail(format!("no container in {text:?}")));
        };
        prop_assert_eq!(&container.id, &id);
        prop_assert_eq!(container.pod_uid.as_deref(), Some(uid.as_str()));
    }
}

/// A Slurm value as kept: short printable ASCII without spaces.
fn slurm_value_ok(value: &Option<String>) -> bool {
    value.as_deref().is_none_or(|v| {
        !v.is_empty()
            && v.len() <= super::slurm::VALUE_MAX
            && v.bytes().all(|b| b.is_ascii_graphic())
    })
}

proptest! {
    /// Any environment, any cgroup text: an answer, never a panic; every
    /// value kept is bounded and printable; nothing but `SLURM_*` values
    /// is kept (a secret elsewhere in the environment never is).
    #[test]
    fn any_environ_or_cgroup_gives_a_bounded_slurm_job(
        entries in prop::collection::vec(
            prop_oneof![
                "SLURM_(JOB_ID|JOB_UID|STEP_ID|JOB_USER|JOB_ACCOUNT|JOB_PARTITION)=[ -~\u{80}-\u{ff}]{0,80}",
                "[A-Z_]{1,12}=[ -~]{0,40}",
            ],
            0..12,
        ),
        secret in "[!-~]{16,24}",
        uid in prop::option::of(0u32..3),
        cgroup in "[0-9]{0,2}:[a-z=]{0,8}:(/[a-z_0-9.]{0,16}){0,6}",
    ) {
        let mut bytes = format!("SECRET={secret}").into_bytes();
        for entry in &entries {
            bytes.push(0);
            bytes.extend_from_slice(entry.as_bytes());
        }
        if let Some(job) = super::slurm::from_environ(&bytes, uid) {
            let text = format!("{job:?}");
            prop_assert!(!text.contains(&secret), "{text}");
            for value in [&job.step, &job.user, &job.account, &job.partition] {
                prop_assert!(slurm_value_ok(value), "{value:?}");
            }
        }
        if let Some(job) = super::slurm::from_cgroup(&cgroup) {
            prop_assert!(slurm_value_ok(&job.step), "{job:?}");
        }
    }
}
