//! A webhook receiver under a test's control: answers 200 to every request
//! and keeps each one (path, JSON body, when), for the tests that follow
//! notifications end to end.

use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use serde_json::Value;

/// One request the receiver got.
#[derive(Debug, Clone)]
pub struct Received {
    /// The request's path (`/alerts`, ...).
    pub path: String,
    /// Its body as JSON (`null` when it was not JSON).
    pub body: Value,
    /// When it arrived.
    pub at: Instant,
}

/// A webhook server on a free loopback port.
pub struct Sink {
    /// Its port on 127.0.0.1.
    pub port: u16,
    got: Arc<Mutex<Vec<Received>>>,
}

impl Sink {
    /// Starts the server on its own thread.
    pub fn start() -> Sink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("address").port();
        let got = Arc::new(Mutex::new(Vec::new()));
        let log = got.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut reader = BufReader::new(stream.try_clone().expect("clone"));
                let Some(request) = super::read_request(&mut reader) else {
                    continue;
                };
                log.lock().expect("lock").push(Received {
                    path: request.path,
                    body: serde_json::from_slice(&request.body).unwrap_or(Value::Null),
                    at: Instant::now(),
                });
                let _ = stream.write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                );
            }
        });
        Sink { port, got }
    }

    /// Every request so far, oldest first.
    pub fn received(&self) -> Vec<Received> {
        self.got.lock().expect("lock").clone()
    }
}
