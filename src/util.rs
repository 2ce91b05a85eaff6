//! Small helpers with no better home.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hasher};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// A random-looking hex string of 16 characters, unique within the process
/// and unlikely to repeat across processes. Built from the standard
/// library's randomly keyed hasher, so no extra dependency is needed.
pub fn random_hex() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut hasher = RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u128(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    hasher.write_u32(std::process::id());
    format!("{:016x}", hasher.finish())
}

/// A fresh id with a readable prefix, such as `sess_3f9a0c1d2b4e5f60`.
pub fn new_id(prefix: &str) -> String {
    format!("{prefix}_{}", random_hex())
}

#[cfg(test)]
mod tests {
    #[test]
    fn ids_do_not_repeat() {
        let ids: std::collections::HashSet<String> =
            (0..1000).map(|_| super::new_id("x")).collect();
        assert_eq!(ids.len(), 1000);
    }
}
