//! The fuzz targets' source of cases: a small seeded generator.

/// A small, fast pseudo-random generator (xorshift), so a case can be
/// replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub(super) fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len())]
    }

    /// A string of `max` pieces drawn from `tokens`, with random bytes
    /// (as lossy text) now and then.
    pub(super) fn text(&mut self, tokens: &[&str], max: usize) -> String {
        let mut out = String::new();
        for _ in 0..self.below(max + 1) {
            if self.below(10) == 0 {
                out.push(char::from_u32(self.below(0x3000) as u32).unwrap_or('?'));
            } else {
                out.push_str(self.pick(tokens));
            }
        }
        out
    }
}
