//! The built-in web view: `/` and its static files under `/assets/`, all
//! embedded in the binary (no CDN, works offline).
//!
//! The page (`web/index.html`, `web/app.js`, `web/app.css`) is written by
//! hand; the charting library (uPlot) is copied from npm into `web/vendor/`
//! by `scripts/update-web-assets.sh`, so `cargo build` needs no npm. Each
//! file is hashed and gzipped once, on first use. The page links every file
//! as `/assets/NAME?v=HASH`: such a request is cached for a year
//! (`immutable`); the page itself and any other request revalidate with the
//! file's ETag.

use std::sync::OnceLock;

use flate2::write::GzEncoder;
use flate2::Compression;
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::header::{
    HeaderValue, ACCEPT_ENCODING, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, ETAG,
    IF_NONE_MATCH, VARY,
};
use hyper::{Request, Response, StatusCode};

use super::response::{accepts_gzip, text, HttpResponse};

/// One embedded file.
struct Source {
    name: &'static str,
    content_type: &'static str,
    body: &'static [u8],
}

/// The files under `/assets/`.
const SOURCES: &[Source] = &[
    Source {
        name: "app.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("web/app.js"),
    },
    Source {
        name: "workloads.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("web/workloads.js"),
    },
    Source {
        name: "app.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("web/app.css"),
    },
    Source {
        name: "uPlot.iife.min.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_bytes!("web/vendor/uPlot.iife.min.js"),
    },
    Source {
        name: "uPlot.min.css",
        content_type: "text/css; charset=utf-8",
        body: include_bytes!("web/vendor/uPlot.min.css"),
    },
];

const INDEX: &str = include_str!("web/index.html");

/// A file ready to serve: its bytes, gzipped bytes and content hash.
struct Prepared {
    name: &'static str,
    content_type: &'static str,
    hash: String,
    plain: Bytes,
    gzip: Bytes,
}

impl Prepared {
    fn new(name: &'static str, content_type: &'static str, body: Vec<u8>) -> Prepared {
        let digest = ring::digest::digest(&ring::digest::SHA256, &body);
        let hash = digest.as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        let gzip = gzip(&body);
        Prepared {
            name,
            content_type,
            hash,
            plain: Bytes::from(body),
            gzip,
        }
    }
}

fn gzip(body: &[u8]) -> Bytes {
    use std::io::Write;
    let mut encoder = GzEncoder::new(Vec::with_capacity(body.len() / 3), Compression::best());
    // Writing into a Vec cannot fail.
    let _ = encoder.write_all(body);
    Bytes::from(encoder.finish().unwrap_or_default())
}

struct Site {
    index: Prepared,
    assets: Vec<Prepared>,
}

fn site() -> &'static Site {
    static SITE: OnceLock<Site> = OnceLock::new();
    SITE.get_or_init(|| {
        let assets: Vec<Prepared> = SOURCES
            .iter()
            .map(|s| Prepared::new(s.name, s.content_type, s.body.to_vec()))
            .collect();
        // `{{asset:NAME}}` in the page becomes the file's versioned URL.
        let mut page = INDEX.to_string();
        for asset in &assets {
            page = page.replace(
                &format!("{{{{asset:{}}}}}", asset.name),
                &format!("/assets/{}?v={}", asset.name, asset.hash),
            );
        }
        Site {
            index: Prepared::new("index.html", "text/html; charset=utf-8", page.into_bytes()),
            assets,
        }
    })
}

/// `GET /`: the page.
pub fn index(request: &Request<Incoming>) -> HttpResponse {
    serve(&site().index, request, false)
}

/// `GET /assets/NAME[?v=HASH]`.
pub fn asset(name: &str, request: &Request<Incoming>) -> HttpResponse {
    let Some(asset) = site().assets.iter().find(|a| a.name == name) else {
        return text(StatusCode::NOT_FOUND, "no such asset\n");
    };
    let versioned = request
        .uri()
        .query()
        .and_then(|q| form_urlencoded::parse(q.as_bytes()).find(|(k, _)| k == "v"))
        .is_some_and(|(_, v)| v == asset.hash.as_str());
    serve(asset, request, versioned)
}

fn serve(file: &Prepared, request: &Request<Incoming>, immutable: bool) -> HttpResponse {
    let header = |name| {
        request
            .headers()
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let etag = format!("\"{}\"", file.hash);
    let cache = if immutable {
        "public, max-age=31536000, immutable"
    } else {
        "no-cache"
    };
    let fresh = header(IF_NONE_MATCH).is_some_and(|given| {
        given
            .split(',')
            .any(|tag| tag.trim().trim_start_matches("W/") == etag)
    });
    let gzip = header(ACCEPT_ENCODING).is_some_and(accepts_gzip);
    let (status, body) = match (fresh, gzip) {
        (true, _) => (StatusCode::NOT_MODIFIED, Bytes::new()),
        (false, true) => (StatusCode::OK, file.gzip.clone()),
        (false, false) => (StatusCode::OK, file.plain.clone()),
    };
    let mut response = Response::new(Full::new(body));
    *response.status_mut() = status;
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static(file.content_type));
    headers.insert(CACHE_CONTROL, HeaderValue::from_static(cache));
    headers.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    if let Ok(value) = HeaderValue::from_str(&etag) {
        headers.insert(ETAG, value);
    }
    if gzip && !fresh {
        headers.insert(CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    }
    response
}

#[cfg(test)]
/// Bytes of every file, gzipped: what a first visit downloads.
pub fn compressed_total() -> usize {
    let site = site();
    site.index.gzip.len() + site.assets.iter().map(|a| a.gzip.len()).sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_links_every_asset_by_its_hash() {
        let site = site();
        let page = std::str::from_utf8(&site.index.plain).expect("UTF-8");
        assert!(!page.contains("{{asset:"), "a placeholder is left: {page}");
        for asset in &site.assets {
            let url = format!("/assets/{}?v={}", asset.name, asset.hash);
            assert!(page.contains(&url), "the page does not link {url}");
        }
        assert!(
            !page.contains("http://") && !page.contains("https://"),
            "no external URL (works offline)"
        );
    }

    #[test]
    fn assets_stay_under_250_kb_compressed() {
        let total = compressed_total();
        assert!(total < 250 * 1024, "{total} bytes gzipped");
    }

    #[test]
    fn gzip_round_trips() {
        use std::io::Read;
        for asset in &site().assets {
            let mut out = Vec::new();
            flate2::read::GzDecoder::new(&asset.gzip[..])
                .read_to_end(&mut out)
                .expect("gunzip");
            assert_eq!(out, asset.plain.to_vec(), "{}", asset.name);
        }
    }
}
