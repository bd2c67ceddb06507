//! The response helpers every handler shares (a leaf: handlers and the
//! router import it, it imports none of them).

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Response, StatusCode};

/// Response type of every handler.
pub type HttpResponse = Response<Full<Bytes>>;

/// 401 with the basic-auth challenge.
pub fn unauthorized() -> HttpResponse {
    let mut response = text(
        StatusCode::UNAUTHORIZED,
        "authentication required: send the user and password configured in basic_auth_users\n",
    );
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        HeaderValue::from_static(super::auth::CHALLENGE),
    );
    response
}

/// A plain-text response.
pub fn text(status: StatusCode, body: &str) -> HttpResponse {
    respond(status, "text/plain; charset=utf-8", body.to_string())
}

pub fn json_value(value: &serde_json::Value) -> HttpResponse {
    respond(StatusCode::OK, "application/json", value.to_string())
}

/// A response with a body and content type.
pub fn respond(
    status: StatusCode,
    content_type: &'static str,
    body: impl Into<Bytes>,
) -> HttpResponse {
    let mut response = Response::new(Full::new(body.into()));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(content_type));
    response
}

/// A JSON response.
pub fn json_response(status: StatusCode, value: &serde_json::Value) -> HttpResponse {
    respond(status, "application/json", value.to_string())
}

/// Whether an `Accept-Encoding` header accepts gzip.
pub fn accepts_gzip(accept_encoding: &str) -> bool {
    accept_encoding.split(',').any(|part| {
        let mut pieces = part.split(';');
        let coding = pieces.next().unwrap_or("").trim();
        let refused = pieces.any(|p| {
            p.trim()
                .strip_prefix("q=")
                .and_then(|q| q.parse::<f64>().ok())
                .is_some_and(|q| q == 0.0)
        });
        coding.eq_ignore_ascii_case("gzip") && !refused
    })
}

#[cfg(test)]
mod tests {
    use super::accepts_gzip;

    #[test]
    fn gzip_negotiation() {
        assert!(accepts_gzip("gzip"));
        assert!(accepts_gzip("deflate, GZIP;q=0.5"));
        assert!(!accepts_gzip("gzip;q=0"));
        assert!(!accepts_gzip("identity"));
    }
}
