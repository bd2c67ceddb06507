use std::path::Path;

use super::*;
use crate::http::webconfig::{ClientAuth, TlsVersion};

/// A self-signed certificate expiring at the start of `year`, and its key (PEM).
fn cert(year: i32) -> (String, String) {
    let key = rcgen::KeyPair::generate().expect("key");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()]).expect("params");
    params.not_after = rcgen::date_time_ymd(year, 1, 1);
    let cert = params.self_signed(&key).expect("cert");
    (cert.pem(), key.serialize_pem())
}

/// Unix seconds of the start of `year` (as `cert` sets notAfter).
fn start_of(year: i32) -> i64 {
    rcgen::date_time_ymd(year, 1, 1).unix_timestamp()
}

fn settings(dir: &Path) -> TlsSettings {
    TlsSettings {
        cert_file: dir.join("server.crt"),
        key_file: dir.join("server.key"),
        client_auth: ClientAuth::NoClientCert,
        client_ca_file: None,
        min_version: TlsVersion::Tls12,
        max_version: TlsVersion::Tls13,
    }
}

fn write(dir: &Path, (cert, key): &(String, String)) {
    std::fs::write(dir.join("server.crt"), cert).expect("write cert");
    std::fs::write(dir.join("server.key"), key).expect("write key");
}

fn same(a: &TlsAcceptor, b: &TlsAcceptor) -> bool {
    Arc::ptr_eq(a.config(), b.config())
}

fn render(reloader: &Arc<TlsReloader>) -> String {
    let mut registry = prometheus_client::registry::Registry::default();
    registry
        .sub_registry_with_prefix("gpuwatch")
        .register_collector(reloader.collector());
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, &registry).expect("encode");
    out
}

#[test]
fn fingerprints_see_a_rewrite_with_the_same_length_and_time() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("server.crt");
    std::fs::write(&path, "AAAA").expect("write");
    let before = Fingerprint::of_files(&[&path]);
    let meta = std::fs::metadata(&path).expect("metadata");
    std::fs::write(&path, "BBBB").expect("rewrite");
    // As `cp -p` or a rewrite within one timestamp tick would leave it.
    std::fs::File::options()
        .write(true)
        .open(&path)
        .and_then(|f| f.set_modified(meta.modified()?))
        .expect("set mtime");
    let after_meta = std::fs::metadata(&path).expect("metadata");
    assert_eq!(
        (meta.modified().ok(), meta.len()),
        (after_meta.modified().ok(), after_meta.len()),
        "mtime and length alone cannot tell these apart"
    );
    let after = Fingerprint::of_files(&[&path]);
    assert_ne!(before, after);
    assert_eq!(
        after,
        Fingerprint::of_files(&[&path]),
        "stable when unchanged"
    );
}

#[test]
fn fingerprints_tell_missing_files_from_content() {
    let dir = tempfile::tempdir().expect("dir");
    let path = dir.path().join("server.key");
    let missing = Fingerprint::of_files(&[&path]);
    assert_eq!(
        missing,
        Fingerprint(vec![FileState::Unreadable(std::io::ErrorKind::NotFound)])
    );
    std::fs::write(&path, "").expect("write");
    let empty = Fingerprint::of_files(&[&path]);
    assert_ne!(missing, empty);
    assert!(matches!(empty.0[0], FileState::Content(_)));
}

#[test]
fn the_client_ca_file_is_watched_when_given() {
    let dir = tempfile::tempdir().expect("dir");
    let mut settings = settings(dir.path());
    assert_eq!(files(&settings).len(), 2);
    settings.client_ca_file = Some(dir.path().join("ca.crt"));
    assert_eq!(files(&settings)[2], dir.path().join("ca.crt"));
}

#[test]
fn a_change_is_loaded_once_settled_and_new_connections_get_it() {
    let dir = tempfile::tempdir().expect("dir");
    write(dir.path(), &cert(2031));
    let reloader = Arc::new(TlsReloader::load(settings(dir.path())).expect("load"));
    assert_eq!(reloader.served().not_after, Some(start_of(2031)));
    let first = reloader.current();
    assert_eq!(reloader.check(), Checked::Unchanged);
    assert_eq!(reloader.check(), Checked::Unchanged);

    write(dir.path(), &cert(2032));
    assert_eq!(reloader.check(), Checked::Settling);
    assert!(same(&first, &reloader.current()), "not before it settled");
    assert_eq!(reloader.check(), Checked::Reloaded);
    assert!(!same(&first, &reloader.current()));
    assert_eq!(reloader.served().not_after, Some(start_of(2032)));
    assert_eq!(reloader.check(), Checked::Unchanged);

    let text = render(&reloader);
    assert!(
        text.contains(&format!(
            "gpuwatch_tls_certificate_expiry_timestamp_seconds {}",
            start_of(2032)
        )),
        "{text}"
    );
    assert!(
        text.contains("gpuwatch_tls_reloads_total{result=\"success\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("gpuwatch_tls_reloads_total{result=\"failure\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("gpuwatch_tls_last_reload_successful 1"),
        "{text}"
    );
}

#[test]
fn a_renewal_written_in_two_steps_is_loaded_without_a_failure() {
    let dir = tempfile::tempdir().expect("dir");
    write(dir.path(), &cert(2031));
    let reloader = TlsReloader::load(settings(dir.path())).expect("load");
    let (cert, key) = cert(2033);
    std::fs::write(dir.path().join("server.crt"), &cert).expect("write cert");
    assert_eq!(reloader.check(), Checked::Settling);
    // The key lands before the next check: the half state is never loaded.
    std::fs::write(dir.path().join("server.key"), &key).expect("write key");
    assert_eq!(reloader.check(), Checked::Settling);
    assert_eq!(reloader.check(), Checked::Reloaded);
    assert_eq!(reloader.served().not_after, Some(start_of(2033)));
    let stats = reloader.stats();
    assert_eq!((stats.successes, stats.failures), (1, 0));
}

#[test]
fn a_bad_state_keeps_the_old_acceptor_and_is_reported_once() {
    let dir = tempfile::tempdir().expect("dir");
    let old = cert(2031);
    write(dir.path(), &old);
    let reloader = Arc::new(TlsReloader::load(settings(dir.path())).expect("load"));
    let first = reloader.current();

    // A new certificate with the old key.
    let new = cert(2034);
    std::fs::write(dir.path().join("server.crt"), &new.0).expect("write cert");
    assert_eq!(reloader.check(), Checked::Settling);
    let Checked::Failed(problems) = reloader.check() else {
        panic!("a certificate with another key's file was loaded");
    };
    let key_file = dir.path().join("server.key").display().to_string();
    assert!(
        problems.iter().any(|p| p.contains(&key_file)),
        "{problems:?}"
    );
    assert!(problems
        .iter()
        .all(|p| !p.contains(&old.1) && !p.contains("PRIVATE KEY")));
    for _ in 0..3 {
        assert_eq!(reloader.check(), Checked::Unchanged, "reported once");
    }
    assert!(same(&first, &reloader.current()));
    assert_eq!(reloader.served().not_after, Some(start_of(2031)));

    // Then a key that is not PEM: another bad state, reported once more.
    std::fs::write(
        dir.path().join("server.key"),
        "-----BEGIN PRIVATE KEY-----\n",
    )
    .expect("write key");
    assert_eq!(reloader.check(), Checked::Settling);
    assert!(matches!(reloader.check(), Checked::Failed(_)));
    assert_eq!(reloader.check(), Checked::Unchanged);
    // Missing files too.
    std::fs::remove_file(dir.path().join("server.key")).expect("remove");
    assert_eq!(reloader.check(), Checked::Settling);
    let Checked::Failed(problems) = reloader.check() else {
        panic!("a missing key was loaded");
    };
    assert!(problems
        .iter()
        .any(|p| p.contains(&key_file) && p.contains("cannot read")));
    assert!(same(&first, &reloader.current()));
    let text = render(&reloader);
    assert!(
        text.contains("gpuwatch_tls_reloads_total{result=\"failure\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("gpuwatch_tls_last_reload_successful 0"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "gpuwatch_tls_certificate_expiry_timestamp_seconds {}",
            start_of(2031)
        )),
        "the old certificate is still the one served: {text}"
    );

    // Fixed: the new pair is used.
    std::fs::write(dir.path().join("server.key"), &new.1).expect("write key");
    assert_eq!(reloader.check(), Checked::Settling);
    assert_eq!(reloader.check(), Checked::Reloaded);
    assert!(!same(&first, &reloader.current()));
    assert_eq!(reloader.served().not_after, Some(start_of(2034)));
    let stats = reloader.stats();
    assert_eq!(
        (stats.successes, stats.failures, stats.last_ok),
        (1, 3, true)
    );
}
