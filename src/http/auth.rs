//! HTTP basic auth against bcrypt hashes, as exporter-toolkit does it.
//!
//! bcrypt is slow on purpose (~50–100 ms at cost 10). A Prometheus scraping
//! every 15 s presents the same credentials each time, so a successful
//! verification is remembered: the cache holds SHA-256 digests of
//! (user, hash, password), never a password, and is bounded. Verifications
//! run on the blocking pool, a few at a time, never on the async executor.
//! An unknown user costs a bcrypt verification too (against a dummy hash),
//! so response times don't tell which users exist.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};

use base64::Engine;
use hyper::header::HeaderValue;
use ring::digest;
use tokio::sync::Semaphore;

/// Successful verifications remembered; past this an arbitrary one is forgotten.
const CACHE_SIZE: usize = 256;

/// bcrypt verifications run at once; more wait (each is CPU-bound).
const CONCURRENT_VERIFICATIONS: usize = 2;

/// The realm in `WWW-Authenticate`.
pub const CHALLENGE: &str = "Basic realm=\"gpuwatch\"";

/// Users and their bcrypt hashes, with the cache of accepted credentials.
pub struct BasicAuth {
    users: BTreeMap<String, String>,
    /// Hash checked for unknown users, at the users' cost.
    dummy: String,
    cache: Mutex<HashSet<[u8; 32]>>,
    slots: Semaphore,
}

impl std::fmt::Debug for BasicAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Hashes and the cache are nobody's business in a log.
        f.debug_struct("BasicAuth")
            .field("users", &self.users.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl BasicAuth {
    /// `users`: name → bcrypt hash (checked by the caller).
    pub fn new(users: BTreeMap<String, String>) -> BasicAuth {
        let cost = users
            .values()
            .filter_map(|h| h.parse::<bcrypt::HashParts>().ok())
            .map(|p| p.get_cost())
            .max()
            .unwrap_or(10);
        // A fixed salt is fine: this hash only has to cost the same time.
        let dummy = bcrypt::hash_with_salt(b"gpuwatch-unknown-user", cost, [7; 16])
            .map(|parts| parts.to_string())
            .unwrap_or_default();
        BasicAuth {
            users,
            dummy,
            cache: Mutex::new(HashSet::new()),
            slots: Semaphore::new(CONCURRENT_VERIFICATIONS),
        }
    }

    /// Whether the `Authorization` header carries a known user and the right password.
    pub async fn check(self: &Arc<Self>, authorization: Option<&HeaderValue>) -> bool {
        let Some((user, password)) = authorization.and_then(parse_basic) else {
            return false;
        };
        let known = self.users.get(&user);
        let hash = known.unwrap_or(&self.dummy).clone();
        let key = cache_key(&user, &hash, &password);
        if known.is_some() && self.cached(&key) {
            return true;
        }
        let Ok(_slot) = self.slots.acquire().await else {
            return false;
        };
        let verified = tokio::task::spawn_blocking(move || {
            bcrypt::verify(password.as_bytes(), &hash).unwrap_or(false)
        })
        .await
        .unwrap_or(false);
        let ok = verified && known.is_some();
        if ok {
            self.remember(key);
        }
        ok
    }

    fn cached(&self, key: &[u8; 32]) -> bool {
        self.cache
            .lock()
            .map(|cache| cache.contains(key))
            .unwrap_or(false)
    }

    fn remember(&self, key: [u8; 32]) {
        if let Ok(mut cache) = self.cache.lock() {
            if cache.len() >= CACHE_SIZE {
                if let Some(old) = cache.iter().next().copied() {
                    cache.remove(&old);
                }
            }
            cache.insert(key);
        }
    }

    #[cfg(test)]
    /// Entries in the cache (for tests).
    pub fn cached_entries(&self) -> usize {
        self.cache.lock().map(|c| c.len()).unwrap_or(0)
    }
}

/// SHA-256 over the user, the hash and the password, each length-prefixed
/// so that no two different triples collide by concatenation.
fn cache_key(user: &str, hash: &str, password: &str) -> [u8; 32] {
    let mut context = digest::Context::new(&digest::SHA256);
    for part in [user, hash, password] {
        context.update(&(part.len() as u64).to_le_bytes());
        context.update(part.as_bytes());
    }
    let mut key = [0u8; 32];
    key.copy_from_slice(context.finish().as_ref());
    key
}

/// `Basic base64(user:password)` → (user, password).
fn parse_basic(value: &HeaderValue) -> Option<(String, String)> {
    let text = value.to_str().ok()?.trim();
    let (scheme, encoded) = text.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let decoded = String::from_utf8(decoded).ok()?;
    let (user, password) = decoded.split_once(':')?;
    Some((user.to_string(), password.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(user: &str, password: &str) -> HeaderValue {
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        HeaderValue::from_str(&format!("Basic {encoded}")).expect("header")
    }

    fn auth() -> Arc<BasicAuth> {
        // Cost 4: the lowest, to keep the test fast.
        let hash = bcrypt::hash("s3cret:with colon", 4).expect("hash");
        Arc::new(BasicAuth::new(BTreeMap::from([("prom".to_string(), hash)])))
    }

    #[test]
    fn parses_basic_headers() {
        assert_eq!(
            parse_basic(&header("a", "b:c")),
            Some(("a".into(), "b:c".into()))
        );
        assert_eq!(
            parse_basic(&HeaderValue::from_static("basic YTpi")),
            Some(("a".into(), "b".into()))
        );
        assert_eq!(parse_basic(&HeaderValue::from_static("Bearer YTpi")), None);
        assert_eq!(parse_basic(&HeaderValue::from_static("Basic !!!")), None);
        assert_eq!(parse_basic(&HeaderValue::from_static("Basic")), None);
        // "ab" without a colon
        assert_eq!(parse_basic(&HeaderValue::from_static("Basic YWI=")), None);
    }

    #[tokio::test]
    async fn checks_and_caches_only_successes() {
        let auth = auth();
        assert!(!auth.check(None).await);
        assert!(!auth.check(Some(&header("prom", "wrong"))).await);
        assert!(
            !auth
                .check(Some(&header("nobody", "s3cret:with colon")))
                .await
        );
        assert_eq!(auth.cached_entries(), 0, "failures are not cached");
        assert!(auth.check(Some(&header("prom", "s3cret:with colon"))).await);
        assert_eq!(auth.cached_entries(), 1);
        assert!(auth.check(Some(&header("prom", "s3cret:with colon"))).await);
        assert_eq!(auth.cached_entries(), 1);
        assert!(!auth.check(Some(&header("prom", "s3cret:with colo"))).await);
    }

    #[test]
    fn cache_is_bounded() {
        let auth = auth();
        for i in 0..(CACHE_SIZE * 2) {
            auth.remember(cache_key("u", "h", &i.to_string()));
        }
        assert_eq!(auth.cached_entries(), CACHE_SIZE);
    }

    #[test]
    fn unknown_users_cost_a_verification() {
        let auth = auth();
        assert!(auth.dummy.starts_with("$2"), "dummy hash: {}", auth.dummy);
        assert!(auth.dummy.contains("$04$"), "at the users' cost");
    }
}
