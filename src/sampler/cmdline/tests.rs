use super::*;

/// `args` as /proc/PID/cmdline holds them: each ended by a NUL.
fn raw(args: &[&str]) -> Vec<u8> {
    let mut out = Vec::new();
    for arg in args {
        out.extend_from_slice(arg.as_bytes());
        out.push(0);
    }
    out
}

fn shown(args: &[&str]) -> String {
    command_line(&raw(args)).unwrap_or_default()
}

#[test]
fn arguments_are_joined_and_the_empty_line_is_none() {
    assert_eq!(
        shown(&["python3", "train.py", "--epochs", "10"]),
        "python3 train.py --epochs 10"
    );
    assert_eq!(command_line(b""), None);
    assert_eq!(command_line(b"\0\0"), None);
}

#[test]
fn every_secret_form_is_masked() {
    let cases: &[(&[&str], &str)] = &[
        // Issue: URLs with user information, any scheme.
        (
            &["psql", "postgres://u:PASS@h/db"],
            "psql postgres://u:***@h/db",
        ),
        (
            &["curl", "https://user:PASS@host/x"],
            "curl https://user:***@host/x",
        ),
        (
            &["app", "--db=mysql://root:PASS@127.0.0.1:3306/x"],
            "app --db=mysql://root:***@127.0.0.1:3306/x",
        ),
        (
            &["app", "redis://:PASS@cache:6379"],
            "app redis://:***@cache:6379",
        ),
        (
            &["git", "clone", "https://PASS@example.org/r.git"],
            "git clone https://***@example.org/r.git",
        ),
        (
            &["app", "amqp://u:P@SS/word@broker"],
            "app amqp://u:***@broker",
        ),
        // Authorization headers, one argument or several, any case.
        (
            &["curl", "-H", "Authorization: Bearer PASS", "https://h/"],
            "curl -H Authorization: Bearer *** https://h/",
        ),
        (
            &["curl", "-H", "authorization:", "BEARER", "PASS"],
            "curl -H authorization: BEARER ***",
        ),
        (
            &["curl", "--header=Authorization: Basic PASS"],
            "curl --header=Authorization: Basic ***",
        ),
        (
            &["curl", "-H", "Authorization: PASS"],
            "curl -H Authorization: ***",
        ),
        (&["curl", "-H", "Authorization:PASS"], "curl -H Authorization:***"),
        (&["tool", "bearer", "PASS"], "tool bearer ***"),
        (&["tool", "BeArEr", "PASS"], "tool BeArEr ***"),
        // name=value.
        (&["app", "--auth=PASS"], "app --auth=***"),
        (&["app", "--pass=PASS"], "app --pass=***"),
        (&["mysql", "--mysql-pwd=PASS"], "mysql --mysql-pwd=***"),
        (&["app", "--password=PASS"], "app --password=***"),
        (&["app", "password=PASS"], "app password=***"),
        (&["app", "--api-key=PASS"], "app --api-key=***"),
        (&["app", "--apiKey=PASS"], "app --apiKey=***"),
        (
            &["env", "AWS_SECRET_ACCESS_KEY=PASS", "python3"],
            "env AWS_SECRET_ACCESS_KEY=*** python3",
        ),
        (&["java", "-Ddb.password=PASS"], "java -Ddb.password=***"),
        (&["spark", "--conf=spark.auth.secret=PASS"], "spark --conf=spark.auth.secret=***"),
        (&["app", "--password=two words PASS"], "app --password=***"),
        (&["app", "--client-credentials=PASS"], "app --client-credentials=***"),
        // The next argument.
        (&["app", "--token", "PASS", "--port", "80"], "app --token *** --port 80"),
        (&["app", "--api-token", "PASS"], "app --api-token ***"),
        (&["app", "--password", "two words PASS"], "app --password ***"),
        (&["app", "--access_token", "-PASS"], "app --access_token ***"),
        (&["mysql", "-p", "PASS"], "mysql -p ***"),
        (&["mysql", "-uroot", "-pPASS", "db"], "mysql -uroot -p*** db"),
        (&["mysql", "-pPASS=x"], "mysql -p***"),
        (&["curl", "-u", "user:PASS", "https://h/"], "curl -u user:*** https://h/"),
        (&["curl", "--user", "user:PASS"], "curl --user user:***"),
        (&["curl", "--user=user:PASS"], "curl --user=user:***"),
        // Shell snippets: word by word.
        (
            &["sh", "-c", "mysql -pPASS && curl -H 'Authorization: Bearer PASS' postgres://u:PASS@h --token PASS"],
            "sh -c mysql -p*** && curl -H 'Authorization: Bearer *** postgres://u:***@h --token ***",
        ),
        (&["sh", "-c", "run --password=PASS --port=1"], "sh -c run --password=*** --port=1"),
    ];
    for (args, expected) in cases {
        let line = shown(args);
        assert_eq!(&line, expected, "{args:?}");
        assert!(!line.contains("PASS"), "{args:?} shows a secret: {line}");
    }
}

#[test]
fn ordinary_arguments_are_unchanged() {
    for args in [
        &["python3", "train.py", "--model", "resnet50", "--epochs=10"][..],
        &[
            "torchrun",
            "--nproc-per-node=8",
            "--max-tokens",
            "4096",
            "--tokenizer",
            "bpe",
        ],
        &[
            "vllm",
            "serve",
            "--port",
            "8000",
            "--tokenizer-mode=auto",
            "--keep-alive",
        ],
        &[
            "python3",
            "-u",
            "serve.py",
            "https://example.org/models/x@v2",
        ],
        &["app", "--author", "alice", "--bypass-cache", "--num-keys=3"],
        &["git", "push", "git@example.org:org/repo.git"],
        &[
            "tritonserver",
            "--model-repository=/models",
            "--http-port=8000",
        ],
        &["bash", "-c", "echo hi && ls -la"],
        &["-bash"],
    ] {
        assert_eq!(shown(args), args.join(" "), "{args:?}");
    }
}

#[test]
fn control_characters_become_question_marks() {
    assert_eq!(
        shown(&["evil\u{1b}[2J", "a\tb\nc", "x\u{7}"]),
        "evil?[2J a b c x?"
    );
    assert_eq!(printable("ok name"), "ok name");
    assert_eq!(printable("a\u{1b}b\r"), "a?b?");
}

#[test]
fn long_lines_are_cut_and_a_cut_word_is_dropped() {
    let long = vec![b'a'; 1000];
    assert_eq!(
        command_line(&long).map(|c| c.chars().count()),
        Some(COMMAND_MAX_CHARS)
    );
    // A megabyte: only CMDLINE_READ_MAX bytes are looked at.
    let mut huge = raw(&["python3"]);
    huge.extend(std::iter::repeat_n(b'x', 1 << 20));
    assert_eq!(command_line(&huge).as_deref(), Some("python3"));
    // A URL cut before its `@` would show its password: it is dropped.
    let mut cut = raw(&["app", &"a".repeat(CMDLINE_READ_MAX - 40)]);
    cut.extend_from_slice(b"postgres://u:PASSPASSPASSPASSPASSPASSPASSPASS@h\0");
    let line = command_line(&cut).expect("a line");
    assert!(!line.contains("PASS"), "{line}");
    assert!(line.starts_with("app aaa"), "{line}");
    // Non-UTF-8 bytes are replaced, not the reason for no line at all.
    assert_eq!(
        command_line(b"caf\xe9\0--x\0").as_deref(),
        Some("caf\u{fffd} --x")
    );
}
