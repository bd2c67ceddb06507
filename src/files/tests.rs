use super::*;

fn limit_error(result: Result<Vec<u8>, FileError>) -> FileError {
    match result {
        Ok(bytes) => panic!("expected an error, read {} bytes", bytes.len()),
        Err(error) => error,
    }
}

#[test]
fn a_regular_file_within_the_limit_is_read_whole() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("exact");
    std::fs::write(&path, b"0123456789").expect("write");
    assert_eq!(
        read_bounded(&path, 10).expect("fits exactly"),
        b"0123456789"
    );
    assert_eq!(read_bounded_string(&path, 64).expect("text"), "0123456789");
}

#[test]
fn a_file_over_the_limit_is_refused_with_its_path_and_the_limit() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("big.toml");
    std::fs::write(&path, vec![b'#'; 11]).expect("write");
    let error = limit_error(read_bounded(&path, 10));
    assert!(
        matches!(error, FileError::TooLarge { limit: 10, .. }),
        "{error:?}"
    );
    let text = error.to_string();
    assert!(
        text.contains("big.toml") && text.contains("10 bytes"),
        "{text}"
    );
    assert_eq!(error.kind(), std::io::ErrorKind::FileTooLarge);
}

#[test]
fn dev_zero_is_refused_without_reading_it() {
    let error = limit_error(read_bounded(Path::new("/dev/zero"), MAX_CONFIG_BYTES));
    assert!(
        matches!(
            error,
            FileError::NotRegular {
                what: "a character device",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("/dev/zero"), "{error}");
}

#[test]
fn a_fifo_without_a_writer_is_refused_not_waited_on() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&path)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(status.success(), "mkfifo failed");
    // Without O_NONBLOCK this open would block until a writer comes: the
    // test would hang rather than fail.
    let error = limit_error(read_bounded(&path, MAX_SECRET_BYTES));
    assert!(
        matches!(
            error,
            FileError::NotRegular {
                what: "a FIFO (named pipe)",
                ..
            }
        ),
        "{error:?}"
    );
}

#[test]
fn a_directory_and_a_missing_file_are_named() {
    let dir = tempfile::tempdir().expect("temp dir");
    let error = limit_error(read_bounded(dir.path(), MAX_CONFIG_BYTES));
    assert!(
        matches!(
            error,
            FileError::NotRegular {
                what: "a directory",
                ..
            }
        ),
        "{error:?}"
    );
    let missing = dir.path().join("missing.pem");
    let error = limit_error(read_bounded(&missing, MAX_PEM_BYTES));
    assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
    assert!(error.to_string().contains("missing.pem"), "{error}");
}

#[test]
fn a_symlink_to_a_regular_file_is_followed() {
    // Kubernetes Secret volumes: token -> ..data/token -> ..2024_01_01/token.
    let dir = tempfile::tempdir().expect("temp dir");
    let target = dir.path().join("..2024_01_01");
    std::fs::create_dir(&target).expect("dir");
    std::fs::write(target.join("token"), "s3cret\n").expect("write");
    std::os::unix::fs::symlink("..2024_01_01", dir.path().join("..data")).expect("symlink");
    std::os::unix::fs::symlink("..data/token", dir.path().join("token")).expect("symlink");
    let text = read_bounded_string(&dir.path().join("token"), MAX_SECRET_BYTES).expect("read");
    assert_eq!(text, "s3cret\n");
    // A symlink to a device is still a device.
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).expect("symlink");
    let error = limit_error(read_bounded(&dir.path().join("zero"), MAX_SECRET_BYTES));
    assert!(matches!(error, FileError::NotRegular { .. }), "{error:?}");
}

#[test]
fn binary_content_is_not_text() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("binary");
    std::fs::write(&path, [0xff, 0xfe, 0x00]).expect("write");
    let error = read_bounded_string(&path, 64).expect_err("not UTF-8");
    assert!(matches!(error, FileError::NotText { .. }), "{error:?}");
}

#[test]
fn read_prefix_reads_the_start_of_any_regular_file_and_refuses_the_rest() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("class");
    std::fs::write(&path, "0x030200\n").expect("write");
    assert_eq!(read_prefix(&path, 64).expect("small"), b"0x030200\n");
    assert_eq!(read_prefix(&path, 4).expect("cut"), b"0x03");
    std::os::unix::fs::symlink("/dev/zero", dir.path().join("zero")).expect("symlink");
    let error = limit_error(read_prefix(&dir.path().join("zero"), 64));
    assert!(
        matches!(
            error,
            FileError::NotRegular {
                what: "a character device",
                ..
            }
        ),
        "{error:?}"
    );
    let fifo = dir.path().join("pipe");
    let status = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo (coreutils) runs");
    assert!(status.success(), "mkfifo failed");
    let error = limit_error(read_prefix(&fifo, 64));
    assert!(
        matches!(
            error,
            FileError::NotRegular {
                what: "a FIFO (named pipe)",
                ..
            }
        ),
        "{error:?}"
    );
}
