//! A real SMTP server for the email tests: `tests/smtp/sink.py` on Debian's
//! python3-aiosmtpd (run by /usr/bin/python3), which stores every accepted
//! message as a file and logs every DATA attempt; plus a test CA and a
//! server certificate for 127.0.0.1 made with rcgen.

#![allow(dead_code)] // Each test binary uses its own subset.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};

/// Debian's python, which owns python3-aiosmtpd.
const PYTHON: &str = "/usr/bin/python3";

/// Panics, saying what to do, unless aiosmtpd is installed.
pub fn require_aiosmtpd() {
    let ok = Command::new(PYTHON)
        .args(["-c", "import aiosmtpd"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "the email tests need a real SMTP server: Debian's python3-aiosmtpd for {PYTHON}. \
         Run scripts/test.sh (it installs it), or apt-get install python3-aiosmtpd"
    );
}

/// A test CA and a server certificate for 127.0.0.1 signed by it, as files.
pub struct Pki {
    /// The CA certificate (PEM) to give as `ca_file`.
    pub ca: PathBuf,
    /// The server certificate.
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
}

impl Pki {
    /// Writes the files into `dir`.
    pub fn new(dir: &Path) -> Pki {
        let ca_key = KeyPair::generate().expect("CA key");
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).expect("CA params");
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "gpuwatch email test CA");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca = ca_params.self_signed(&ca_key).expect("CA cert");
        let key = KeyPair::generate().expect("key");
        let mut params = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".into()])
            .expect("params");
        params
            .distinguished_name
            .push(DnType::CommonName, "gpuwatch test smtp");
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &ca, &ca_key).expect("sign");
        let pki = Pki {
            ca: dir.join("ca.crt"),
            cert: dir.join("smtp.crt"),
            key: dir.join("smtp.key"),
        };
        std::fs::write(&pki.ca, ca.pem()).expect("write CA");
        std::fs::write(&pki.cert, cert.pem()).expect("write cert");
        std::fs::write(&pki.key, key.serialize_pem()).expect("write key");
        pki
    }
}

/// How the sink behaves.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Offer STARTTLS with this (cert, key).
    pub starttls: Option<(PathBuf, PathBuf)>,
    /// Speak TLS from the first byte with this (cert, key).
    pub implicit_tls: Option<(PathBuf, PathBuf)>,
    /// Require AUTH with "user:password".
    pub auth: Option<String>,
    /// Answer a failed AUTH with a 535 that quotes the credentials sent.
    pub auth_echo: bool,
    /// Answer every message with this reply, e.g. "550 5.7.1 no".
    pub reject: Option<String>,
    /// Answer the first N messages with `fail_reply`.
    pub fail_first: usize,
    /// E.g. "451 4.3.0 later".
    pub fail_reply: Option<String>,
    /// Hold the first N messages for 30 s without a reply.
    pub hang_first: usize,
}

/// One DATA attempt the sink saw.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// 1, 2, ...
    pub number: u64,
    /// Whether the session was encrypted.
    pub tls: bool,
    /// Whether the client had authenticated.
    pub auth: bool,
    /// The reply given.
    pub reply: String,
}

/// One stored message.
#[derive(Debug, Clone)]
pub struct Mail {
    /// The file.
    pub path: PathBuf,
    /// The raw message.
    pub raw: String,
}

impl Mail {
    /// A header's (first) value, unfolded.
    pub fn header(&self, name: &str) -> Option<String> {
        let head = self.raw.split("\r\n\r\n").next().unwrap_or("");
        let unfolded = head.replace("\r\n ", " ").replace("\r\n\t", " ");
        unfolded.lines().find_map(|line| {
            let (n, v) = line.split_once(':')?;
            n.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    }

    /// The decoded subject (RFC 2047 words decoded).
    pub fn subject(&self) -> String {
        decode_words(&self.header("Subject").unwrap_or_default())
    }

    /// The text/plain and text/html parts, decoded (quoted-printable or
    /// base64), via Python's email package (the reference MIME parser).
    pub fn parts(&self) -> (String, String) {
        let script = r#"
import email, email.policy, json, sys
m = email.message_from_binary_file(open(sys.argv[1], 'rb'), policy=email.policy.default)
out = {}
for part in m.walk():
    if part.get_content_maintype() == 'text':
        out[part.get_content_subtype()] = part.get_content()
print(json.dumps(out))
"#;
        let output = Command::new(PYTHON)
            .args(["-c", script])
            .arg(&self.path)
            .output()
            .expect("python3");
        assert!(
            output.status.success(),
            "{}",
            String::from_utf8_lossy(&output.stderr)
        );
        let parts: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
        (
            parts["plain"].as_str().unwrap_or("").to_string(),
            parts["html"].as_str().unwrap_or("").to_string(),
        )
    }
}

/// Decodes RFC 2047 encoded words with Python's email package.
fn decode_words(text: &str) -> String {
    let output = Command::new(PYTHON)
        .args([
            "-c",
            "import sys, email.header; print(str(email.header.make_header(email.header.decode_header(sys.argv[1]))))",
            text,
        ])
        .output()
        .expect("python3");
    String::from_utf8_lossy(&output.stdout)
        .trim_end()
        .to_string()
}

/// A running sink; killed when dropped.
pub struct Sink {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// Where it stores messages.
    pub dir: PathBuf,
    options: Options,
}

impl Sink {
    /// Starts the sink on `port` (storing into `dir`) and waits until it
    /// listens.
    pub fn start(dir: &Path, port: u16, options: Options) -> Sink {
        require_aiosmtpd();
        let mut sink = Sink {
            child: None,
            port,
            dir: dir.to_path_buf(),
            options,
        };
        sink.up();
        sink
    }

    /// Starts it again after [`Sink::stop`].
    pub fn up(&mut self) {
        assert!(self.child.is_none(), "the sink runs already");
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/smtp/sink.py");
        let mut command = Command::new(PYTHON);
        command
            .arg(script)
            .arg("--dir")
            .arg(&self.dir)
            .arg("--port")
            .arg(self.port.to_string());
        let o = &self.options;
        if let Some((cert, key)) = &o.starttls {
            command.arg("--starttls").arg(cert).arg(key);
        }
        if let Some((cert, key)) = &o.implicit_tls {
            command.arg("--implicit-tls").arg(cert).arg(key);
        }
        if let Some(auth) = &o.auth {
            command.arg("--auth").arg(auth);
        }
        if o.auth_echo {
            command.arg("--auth-echo");
        }
        if let Some(reject) = &o.reject {
            command.arg("--reject").arg(reject);
        }
        if o.fail_first > 0 {
            command
                .arg("--fail-first")
                .arg(o.fail_first.to_string())
                .arg("--fail-reply")
                .arg(
                    o.fail_reply
                        .as_deref()
                        .unwrap_or("451 4.3.0 Try again later"),
                );
        }
        if o.hang_first > 0 {
            command.arg("--hang-first").arg(o.hang_first.to_string());
        }
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the SMTP sink");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                let _ = tx.send(line);
            }
        });
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            match rx.recv_timeout(Duration::from_millis(200)) {
                Ok(line) if line.starts_with("READY") => break,
                Ok(_) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = child.wait();
                    panic!("the SMTP sink exited before it was ready: {status:?}");
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            if Instant::now() > deadline {
                let _ = child.kill();
                panic!("the SMTP sink did not start within 30 s");
            }
        }
        self.child = Some(child);
    }

    /// Stops it (the port refuses connections until [`Sink::up`]).
    pub fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            // SIGTERM: it stops its controller and exits.
            let _ = Command::new("kill").arg(child.id().to_string()).status();
            let deadline = Instant::now() + Duration::from_secs(10);
            while Instant::now() < deadline {
                if let Ok(Some(_)) = child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// The DATA attempts so far.
    pub fn attempts(&self) -> Vec<Attempt> {
        let text = std::fs::read_to_string(self.dir.join("attempts.jsonl")).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .map(|v| Attempt {
                number: v["number"].as_u64().unwrap_or(0),
                tls: v["tls"].as_bool().unwrap_or(false),
                auth: v["auth"].as_bool().unwrap_or(false),
                reply: v["reply"].as_str().unwrap_or("").to_string(),
            })
            .collect()
    }

    /// The stored messages, oldest first.
    pub fn mails(&self) -> Vec<Mail> {
        let mut paths: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|d| {
                d.flatten()
                    .map(|e| e.path())
                    .filter(|p| p.extension().is_some_and(|x| x == "eml"))
                    .collect()
            })
            .unwrap_or_default();
        paths.sort();
        paths
            .into_iter()
            .map(|path| Mail {
                raw: String::from_utf8_lossy(&std::fs::read(&path).expect("read mail"))
                    .into_owned(),
                path,
            })
            .collect()
    }

    /// Waits until some stored message satisfies `check`.
    pub fn wait_for(&self, what: &str, timeout: Duration, check: impl Fn(&Mail) -> bool) -> Mail {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(m) = self.mails().into_iter().find(|m| check(m)) {
                return m;
            }
            assert!(
                Instant::now() < deadline,
                "no {what} within {timeout:?}; received: {:#?}",
                self.mails()
                    .iter()
                    .map(|m| m.header("Subject"))
                    .collect::<Vec<_>>()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Sink {
    fn drop(&mut self) {
        self.stop();
    }
}
