//! Who may change alerting through the API.
//!
//! The agent listens on every interface by default, so that Prometheus can
//! scrape it; without credentials anyone who can reach the port could
//! otherwise silence every alert. Writes (`POST`/`DELETE` under
//! `/api/v1/silences`) are therefore accepted only from this node (a
//! loopback peer: `gpuwatch silence` runs there), or from anywhere once the
//! web configuration asks for basic auth (every request has then passed it
//! before it is routed).

use std::net::{IpAddr, SocketAddr};

use hyper::{Method, StatusCode};

use super::response::{text, HttpResponse};

/// What the router knows about the client of a request.
#[derive(Debug, Clone, Copy)]
pub struct Client {
    /// The TCP peer.
    pub peer: SocketAddr,
    /// Whether it passed basic auth (only when basic auth is configured).
    pub authenticated: bool,
}

/// Whether `ip` is this machine's loopback: 127.0.0.0/8, `::1`, or an
/// IPv4-mapped loopback address (`::ffff:127.0.0.1`, what an IPv4 client
/// looks like on a dual-stack `[::]` listener).
pub fn is_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => v4.is_loopback(),
        IpAddr::V6(v6) => {
            v6.is_loopback() || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

/// Whether a method changes state (everything but `GET`, `HEAD` and `OPTIONS`).
pub fn is_write(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// Whether `client` may change silences.
pub fn may_change_alerting(client: &Client) -> bool {
    client.authenticated || is_loopback(client.peer.ip())
}

/// 403 for a write from elsewhere: why, and what to do.
pub fn forbidden(client: &Client) -> HttpResponse {
    text(
        StatusCode::FORBIDDEN,
        &format!(
            "forbidden: silences can only be changed from this node (a loopback address), and {} is not one. \
             Run `gpuwatch silence` on the node itself, or configure basic_auth_users in the web configuration \
             (--web-config or server.web_config) so that authenticated users may change them from anywhere\n",
            client.peer.ip()
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(address: &str, authenticated: bool) -> Client {
        Client {
            peer: address.parse().expect("socket address"),
            authenticated,
        }
    }

    #[test]
    fn loopback_ipv4_ipv6_and_mapped() {
        for loopback in [
            "127.0.0.1",
            "127.1.2.3",
            "::1",
            "::ffff:127.0.0.1",
            "::ffff:127.9.9.9",
        ] {
            let ip: IpAddr = loopback.parse().expect("ip");
            assert!(is_loopback(ip), "{loopback}");
        }
        for remote in [
            "10.0.0.1",
            "192.168.1.5",
            "0.0.0.0",
            "128.0.0.1",
            "::",
            "::2",
            "fe80::1",
            "2001:db8::1",
            "::ffff:10.0.0.1",
            "::ffff:128.0.0.1",
            // IPv4-compatible (deprecated), not mapped: not loopback.
            "::127.0.0.1",
        ] {
            let ip: IpAddr = remote.parse().expect("ip");
            assert!(!is_loopback(ip), "{remote}");
        }
    }

    #[test]
    fn writes_need_loopback_or_basic_auth() {
        assert!(may_change_alerting(&client("127.0.0.1:40000", false)));
        assert!(may_change_alerting(&client("[::1]:40000", false)));
        assert!(may_change_alerting(&client(
            "[::ffff:127.0.0.1]:40000",
            false
        )));
        assert!(!may_change_alerting(&client("10.1.2.3:40000", false)));
        assert!(!may_change_alerting(&client("[2001:db8::7]:40000", false)));
        assert!(!may_change_alerting(&client(
            "[::ffff:10.1.2.3]:40000",
            false
        )));
        assert!(may_change_alerting(&client("10.1.2.3:40000", true)));
        assert!(may_change_alerting(&client("[2001:db8::7]:40000", true)));
    }

    #[test]
    fn only_reads_are_free() {
        assert!(!is_write(&Method::GET));
        assert!(!is_write(&Method::HEAD));
        assert!(!is_write(&Method::OPTIONS));
        assert!(is_write(&Method::POST));
        assert!(is_write(&Method::DELETE));
        assert!(is_write(&Method::PUT));
        assert!(is_write(&Method::PATCH));
    }

    #[tokio::test]
    async fn the_refusal_says_why_and_what_to_do() {
        use http_body_util::BodyExt;
        let response = forbidden(&client("10.1.2.3:40000", false));
        assert_eq!(response.status(), StatusCode::FORBIDDEN);
        let body = response
            .into_body()
            .collect()
            .await
            .expect("body")
            .to_bytes();
        let body = String::from_utf8_lossy(&body);
        assert!(body.contains("10.1.2.3"), "{body}");
        assert!(body.contains("gpuwatch silence"), "{body}");
        assert!(body.contains("basic_auth_users"), "{body}");
    }
}
