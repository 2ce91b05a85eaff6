//! Decoding of compressed web bodies for `fetch_url`: gzip (RFC 1952),
//! zlib (RFC 1950) and raw deflate (RFC 1951), written here because the
//! HTTP client is built without its own decoders. The input is already
//! in memory (capped by the download cap); the output is capped too, so a
//! small body that would inflate to gigabytes stops at the cap and is
//! never held whole. A stream that breaks the format is an error that
//! says where; one that merely ends early is told apart, so a body cut by
//! the download cap still gives what it had.

/// How decoding stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stop {
    /// The stream ended properly (checksums matched).
    End,
    /// The output reached the cap with more to come; the rest was not
    /// decoded.
    Cap,
    /// The input ended in the middle of the stream.
    Truncated,
}

/// What was decoded, and how it stopped.
#[derive(Debug)]
pub(crate) struct Inflated {
    pub bytes: Vec<u8>,
    pub stop: Stop,
}

/// Why decoding stopped inside the bit reader or a block.
enum Halt {
    Truncated,
    Cap,
    Corrupt(&'static str),
}

/// A `Content-Encoding: gzip` body: one or more gzip members, decoded into
/// at most `cap` bytes. `Err` says how the stream is broken.
pub(crate) fn gunzip(input: &[u8], cap: usize) -> Result<Inflated, String> {
    let mut out = Vec::new();
    let mut at = 0;
    loop {
        match gzip_member(&input[at..], &mut out, cap) {
            Ok(used) => at += used,
            Err(Halt::Cap) => return Ok(cut(out, Stop::Cap)),
            Err(Halt::Truncated) => return Ok(cut(out, Stop::Truncated)),
            Err(Halt::Corrupt(why)) => return Err(format!("corrupt gzip data: {why}")),
        }
        // Members may follow one another (RFC 1952 §2.2); anything else
        // after a whole member is ignored, as browsers do.
        if !input[at..].starts_with(&[0x1f, 0x8b]) {
            return Ok(cut(out, Stop::End));
        }
    }
}

/// A `Content-Encoding: deflate` body: a zlib stream as the standard says,
/// or raw deflate, which some servers send instead (told apart by the
/// zlib header's check bits).
pub(crate) fn zlib_or_raw(input: &[u8], cap: usize) -> Result<Inflated, String> {
    let mut out = Vec::new();
    let zlib = input.len() >= 2
        && input[0] & 0x0f == 8
        && input[0] >> 4 <= 7
        && (u16::from(input[0]) << 8 | u16::from(input[1])) % 31 == 0;
    let result = if zlib {
        zlib_stream(input, &mut out, cap)
    } else {
        inflate_into(input, &mut out, cap).map(|_| ())
    };
    match result {
        Ok(()) => Ok(cut(out, Stop::End)),
        Err(Halt::Cap) => Ok(cut(out, Stop::Cap)),
        Err(Halt::Truncated) => Ok(cut(out, Stop::Truncated)),
        Err(Halt::Corrupt(why)) => Err(format!("corrupt deflate data: {why}")),
    }
}

/// Raw deflate alone (RFC 1951), for tests and the fuzz target: the
/// output and how it stopped.
pub(crate) fn inflate(input: &[u8], cap: usize) -> Result<Inflated, String> {
    let mut out = Vec::new();
    match inflate_into(input, &mut out, cap) {
        Ok(_) => Ok(cut(out, Stop::End)),
        Err(Halt::Cap) => Ok(cut(out, Stop::Cap)),
        Err(Halt::Truncated) => Ok(cut(out, Stop::Truncated)),
        Err(Halt::Corrupt(why)) => Err(format!("corrupt deflate data: {why}")),
    }
}

fn cut(bytes: Vec<u8>, stop: Stop) -> Inflated {
    Inflated { bytes, stop }
}

/// One gzip member appended to `out`; the bytes of input it took.
fn gzip_member(input: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<usize, Halt> {
    const FHCRC: u8 = 2;
    const FEXTRA: u8 = 4;
    const FNAME: u8 = 8;
    const FCOMMENT: u8 = 16;
    let byte = |at: usize| input.get(at).copied().ok_or(Halt::Truncated);
    if byte(0)? != 0x1f || byte(1)? != 0x8b {
        return Err(Halt::Corrupt("not a gzip header"));
    }
    if byte(2)? != 8 {
        return Err(Halt::Corrupt("a compression method other than deflate"));
    }
    let flags = byte(3)?;
    if flags & 0xe0 != 0 {
        return Err(Halt::Corrupt("reserved header flags set"));
    }
    // MTIME (4), XFL, OS.
    let mut at = 10;
    byte(at - 1)?;
    if flags & FEXTRA != 0 {
        let length = usize::from(byte(at)?) | usize::from(byte(at + 1)?) << 8;
        at += 2 + length;
        if at > input.len() {
            return Err(Halt::Truncated);
        }
    }
    for flag in [FNAME, FCOMMENT] {
        if flags & flag != 0 {
            let end = input[at.min(input.len())..]
                .iter()
                .position(|b| *b == 0)
                .ok_or(Halt::Truncated)?;
            at += end + 1;
        }
    }
    if flags & FHCRC != 0 {
        at += 2;
        if at > input.len() {
            return Err(Halt::Truncated);
        }
    }
    let start = out.len();
    let used = inflate_into(&input[at..], out, cap)?;
    at += used;
    let trailer = input.get(at..at + 8).ok_or(Halt::Truncated)?;
    let crc = u32::from_le_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    let size = u32::from_le_bytes([trailer[4], trailer[5], trailer[6], trailer[7]]);
    if crc != crc32(&out[start..]) {
        return Err(Halt::Corrupt("the CRC-32 does not match the data"));
    }
    // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
    if size != (out.len() - start) as u32 {
        return Err(Halt::Corrupt("the length in the trailer does not match"));
    }
    Ok(at + 8)
}

/// A zlib stream appended to `out`.
fn zlib_stream(input: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<(), Halt> {
    const FDICT: u8 = 0x20;
    if input[1] & FDICT != 0 {
        return Err(Halt::Corrupt("the stream needs a preset dictionary"));
    }
    let start = out.len();
    let used = inflate_into(&input[2..], out, cap)?;
    let trailer = input.get(2 + used..2 + used + 4).ok_or(Halt::Truncated)?;
    let adler = u32::from_be_bytes([trailer[0], trailer[1], trailer[2], trailer[3]]);
    if adler != adler32(&out[start..]) {
        return Err(Halt::Corrupt("the Adler-32 does not match the data"));
    }
    Ok(())
}

/// Reads bits least significant first, a byte at a time, as deflate
/// packs them.
struct Bits<'a> {
    input: &'a [u8],
    at: usize,
    buffer: u32,
    count: u32,
}

impl Bits<'_> {
    fn take(&mut self, n: u32) -> Result<u32, Halt> {
        while self.count < n {
            let byte = *self.input.get(self.at).ok_or(Halt::Truncated)?;
            self.at += 1;
            self.buffer |= u32::from(byte) << self.count;
            self.count += 8;
        }
        let value = self.buffer & ((1u32 << n) - 1);
        self.buffer = self.buffer.checked_shr(n).unwrap_or(0);
        self.count -= n;
        Ok(value)
    }

    /// Drops the bits left of the current byte (before a stored block,
    /// and at the end of the stream).
    fn align(&mut self) {
        self.buffer = 0;
        self.count = 0;
    }
}

const MAX_BITS: usize = 15;
const LENGTH_CODES: usize = 286;
const DISTANCE_CODES: usize = 30;

/// A canonical Huffman code: how many codes of each length, and the
/// symbols in code order (as in zlib's `puff`).
struct Huffman {
    counts: [u16; MAX_BITS + 1],
    symbols: [u16; 288],
}

impl Huffman {
    /// The code of `lengths` (0: the symbol is unused). `Err` when the
    /// lengths ask for more codes than fit; `Ok((code, left))` where
    /// `left > 0` means the code is incomplete.
    fn new(lengths: &[u8]) -> Result<(Huffman, i32), Halt> {
        let mut counts = [0u16; MAX_BITS + 1];
        for &length in lengths {
            counts[usize::from(length)] += 1;
        }
        let mut left: i32 = 1;
        for &count in &counts[1..] {
            left = left * 2 - i32::from(count);
            if left < 0 {
                return Err(Halt::Corrupt("a Huffman code is over-subscribed"));
            }
        }
        let mut offsets = [0u16; MAX_BITS + 2];
        for length in 1..=MAX_BITS {
            offsets[length + 1] = offsets[length] + counts[length];
        }
        let mut symbols = [0u16; 288];
        for (symbol, &length) in lengths.iter().enumerate() {
            if length != 0 {
                let slot = &mut offsets[usize::from(length)];
                symbols[usize::from(*slot)] = symbol as u16;
                *slot += 1;
            }
        }
        Ok((Huffman { counts, symbols }, left))
    }

    fn decode(&self, bits: &mut Bits) -> Result<u16, Halt> {
        let (mut code, mut first, mut index) = (0i32, 0i32, 0i32);
        for length in 1..=MAX_BITS {
            code |= bits.take(1)? as i32;
            let count = i32::from(self.counts[length]);
            if code - first < count {
                return Ok(self.symbols[(index + code - first) as usize]);
            }
            index += count;
            first = (first + count) << 1;
            code <<= 1;
        }
        Err(Halt::Corrupt("a code that is not in the table"))
    }
}

pub(crate) const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];
pub(crate) const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];
pub(crate) const DISTANCE_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
pub(crate) const DISTANCE_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Raw deflate appended to `out`, at most `cap` bytes in all; the bytes
/// of input it took (up to the end of the last block's byte).
fn inflate_into(input: &[u8], out: &mut Vec<u8>, cap: usize) -> Result<usize, Halt> {
    let mut bits = Bits {
        input,
        at: 0,
        buffer: 0,
        count: 0,
    };
    let start = out.len();
    // Built once a stream: a stream of many tiny fixed blocks costs no
    // more than its length.
    let mut fixed = None;
    loop {
        let last = bits.take(1)? == 1;
        match bits.take(2)? {
            0 => stored(&mut bits, out, cap)?,
            1 => {
                if fixed.is_none() {
                    fixed = Some(fixed_codes()?);
                }
                if let Some((literals, distances)) = &fixed {
                    codes(&mut bits, out, start, cap, literals, distances)?;
                }
            }
            2 => {
                let (literals, distances) = dynamic_codes(&mut bits)?;
                codes(&mut bits, out, start, cap, &literals, &distances)?;
            }
            _ => return Err(Halt::Corrupt("a block of the reserved type 3")),
        }
        if last {
            bits.align();
            return Ok(bits.at);
        }
    }
}

fn stored(bits: &mut Bits, out: &mut Vec<u8>, cap: usize) -> Result<(), Halt> {
    bits.align();
    let header = bits
        .input
        .get(bits.at..bits.at + 4)
        .ok_or(Halt::Truncated)?;
    let length = u16::from_le_bytes([header[0], header[1]]);
    let complement = u16::from_le_bytes([header[2], header[3]]);
    if length != !complement {
        return Err(Halt::Corrupt(
            "a stored block's length and its complement differ",
        ));
    }
    bits.at += 4;
    let wanted = usize::from(length);
    let available = &bits.input[bits.at..];
    let room = cap - out.len();
    let take = wanted.min(available.len()).min(room);
    out.extend_from_slice(&available[..take]);
    bits.at += take;
    if take < wanted {
        return Err(if take == room {
            Halt::Cap
        } else {
            Halt::Truncated
        });
    }
    Ok(())
}

fn fixed_codes() -> Result<(Huffman, Huffman), Halt> {
    let mut lengths = [0u8; 288];
    lengths[..144].fill(8);
    lengths[144..256].fill(9);
    lengths[256..280].fill(7);
    lengths[280..].fill(8);
    let (literals, _) = Huffman::new(&lengths)?;
    let (distances, _) = Huffman::new(&[5u8; DISTANCE_CODES])?;
    Ok((literals, distances))
}

fn dynamic_codes(bits: &mut Bits) -> Result<(Huffman, Huffman), Halt> {
    const ORDER: [usize; 19] = [
        16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
    ];
    let literal_count = bits.take(5)? as usize + 257;
    let distance_count = bits.take(5)? as usize + 1;
    let length_count = bits.take(4)? as usize + 4;
    if literal_count > LENGTH_CODES || distance_count > DISTANCE_CODES {
        return Err(Halt::Corrupt("a dynamic block with too many codes"));
    }
    let mut code_lengths = [0u8; 19];
    for &slot in &ORDER[..length_count] {
        code_lengths[slot] = bits.take(3)? as u8;
    }
    let (length_code, left) = Huffman::new(&code_lengths)?;
    if left != 0 {
        return Err(Halt::Corrupt("an incomplete code-length code"));
    }
    let total = literal_count + distance_count;
    let mut lengths = [0u8; LENGTH_CODES + DISTANCE_CODES];
    let mut at = 0;
    while at < total {
        let symbol = length_code.decode(bits)?;
        let (value, repeat) = match symbol {
            0..=15 => (symbol as u8, 1),
            16 => {
                if at == 0 {
                    return Err(Halt::Corrupt("a repeat with no length before it"));
                }
                (lengths[at - 1], 3 + bits.take(2)? as usize)
            }
            17 => (0, 3 + bits.take(3)? as usize),
            _ => (0, 11 + bits.take(7)? as usize),
        };
        if at + repeat > total {
            return Err(Halt::Corrupt("code lengths run past their count"));
        }
        lengths[at..at + repeat].fill(value);
        at += repeat;
    }
    if lengths[256] == 0 {
        return Err(Halt::Corrupt(
            "a dynamic block without an end-of-block code",
        ));
    }
    // An incomplete code is allowed only when it has at most one code, of
    // length one (RFC 1951 §3.2.7: "one distance code of one bit"; no
    // distance code at all for a block of literals), as zlib's `puff`
    // reads it.
    let single = |lengths: &[u8], code: &Huffman| {
        usize::from(code.counts[0]) + usize::from(code.counts[1]) == lengths.len()
    };
    let (literals, left) = Huffman::new(&lengths[..literal_count])?;
    if left > 0 && !single(&lengths[..literal_count], &literals) {
        return Err(Halt::Corrupt("an incomplete literal/length code"));
    }
    let (distances, left) = Huffman::new(&lengths[literal_count..total])?;
    if left > 0 && !single(&lengths[literal_count..total], &distances) {
        return Err(Halt::Corrupt("an incomplete distance code"));
    }
    Ok((literals, distances))
}

/// The symbols of one Huffman block; back references reach no further
/// back than this stream's own output (from `start`).
fn codes(
    bits: &mut Bits,
    out: &mut Vec<u8>,
    start: usize,
    cap: usize,
    literals: &Huffman,
    distances: &Huffman,
) -> Result<(), Halt> {
    loop {
        let symbol = usize::from(literals.decode(bits)?);
        match symbol {
            0..=255 => {
                if out.len() >= cap {
                    return Err(Halt::Cap);
                }
                out.push(symbol as u8);
            }
            256 => return Ok(()),
            _ => {
                let index = symbol - 257;
                if index >= LENGTH_BASE.len() {
                    return Err(Halt::Corrupt("an invalid length symbol"));
                }
                let length = usize::from(LENGTH_BASE[index])
                    + bits.take(u32::from(LENGTH_EXTRA[index]))? as usize;
                let code = usize::from(distances.decode(bits)?);
                if code >= DISTANCE_BASE.len() {
                    return Err(Halt::Corrupt("an invalid distance symbol"));
                }
                let distance = usize::from(DISTANCE_BASE[code])
                    + bits.take(u32::from(DISTANCE_EXTRA[code]))? as usize;
                if distance > out.len() - start {
                    return Err(Halt::Corrupt("a distance too far back"));
                }
                let room = cap - out.len();
                let from = out.len() - distance;
                for offset in 0..length.min(room) {
                    let byte = out[from + offset];
                    out.push(byte);
                }
                if length > room {
                    return Err(Halt::Cap);
                }
            }
        }
    }
}

/// The CRC-32 of gzip (ISO 3309, reflected, polynomial 0xEDB88320).
pub(crate) fn crc32(data: &[u8]) -> u32 {
    const TABLE: [u32; 256] = {
        let mut table = [0u32; 256];
        let mut n = 0;
        while n < 256 {
            let mut c = n as u32;
            let mut k = 0;
            while k < 8 {
                c = if c & 1 != 0 {
                    0xedb8_8320 ^ (c >> 1)
                } else {
                    c >> 1
                };
                k += 1;
            }
            table[n] = c;
            n += 1;
        }
        table
    };
    let mut crc = !0u32;
    for &byte in data {
        crc = TABLE[((crc ^ u32::from(byte)) & 0xff) as usize] ^ (crc >> 8);
    }
    !crc
}

/// The Adler-32 of zlib.
pub(crate) fn adler32(data: &[u8]) -> u32 {
    const MODULUS: u32 = 65_521;
    // 5,552 bytes is the most that can be summed before a u32 overflows.
    let (mut a, mut b) = (1u32, 0u32);
    for chunk in data.chunks(5552) {
        for &byte in chunk {
            a += u32::from(byte);
            b += a;
        }
        a %= MODULUS;
        b %= MODULUS;
    }
    b << 16 | a
}

#[cfg(test)]
mod tests {
    use super::*;

    // The streams below were made with Python's zlib when these tests were
    // written (`zlib.compressobj(level, zlib.DEFLATED, -15, 9, strategy)`
    // for raw deflate, `gzip.compress(…, mtime=0)`, `zlib.compress`).

    /// Level 0: one stored block.
    const STORED: &[u8] = &[
        0x01, 0x14, 0x00, 0xeb, 0xff, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x2c, 0x20, 0x73, 0x74, 0x6f,
        0x72, 0x65, 0x64, 0x20, 0x77, 0x6f, 0x72, 0x6c, 0x64, 0x0a,
    ];
    /// `Z_FIXED`: one block of the fixed Huffman code, with back references.
    const FIXED: &[u8] = &[
        0x4b, 0x4c, 0x4a, 0x4e, 0x84, 0x21, 0x85, 0xb4, 0xcc, 0x8a, 0xd4, 0x14, 0x05, 0x8f, 0xd2,
        0xb4, 0xb4, 0xdc, 0xc4, 0x3c, 0x1d, 0x05, 0xb8, 0x84, 0x22, 0x00,
    ];
    /// Level 9 of `lcg_text()`: one block with its own (dynamic) codes.
    const DYNAMIC: &[u8] = &[
        0x2d, 0x8f, 0xdb, 0x11, 0x44, 0x31, 0x08, 0x42, 0xff, 0xad, 0xc2, 0xd6, 0xc0, 0x57, 0xff,
        0x1d, 0xec, 0xc9, 0x9d, 0x9d, 0xc9, 0x98, 0x04, 0x11, 0xd0, 0x93, 0x2a, 0x95, 0xc7, 0x23,
        0xbb, 0xe3, 0x04, 0x70, 0x5d, 0x93, 0xa7, 0xca, 0x5a, 0xf1, 0x91, 0x23, 0xc7, 0x9e, 0xf3,
        0x2b, 0x92, 0x61, 0xce, 0xca, 0x33, 0xa2, 0xfd, 0x3d, 0xc2, 0x52, 0xdd, 0xa8, 0x37, 0x19,
        0x91, 0xe8, 0x94, 0x9a, 0x7a, 0x8f, 0x63, 0x6a, 0xee, 0x31, 0xa7, 0xcd, 0xd0, 0xfa, 0x81,
        0xc0, 0x0d, 0x6f, 0xf1, 0xd3, 0xb8, 0x90, 0xf0, 0x09, 0x2f, 0x26, 0x1d, 0x9a, 0xc3, 0xe9,
        0xe3, 0xb9, 0xb7, 0x02, 0x6b, 0x60, 0x27, 0x56, 0x65, 0x5d, 0xae, 0x8f, 0x20, 0xea, 0x22,
        0x1b, 0xa7, 0x66, 0x2f, 0x9f, 0x1f, 0x7a, 0x9f, 0xb2, 0x91, 0xd4, 0x4b, 0x06, 0x82, 0x62,
        0x94, 0xce, 0x43, 0x34, 0xa7, 0x92, 0xe6, 0xcb, 0x1d, 0x5f, 0x2b, 0xbe, 0x75, 0xb8, 0x9e,
        0x3b, 0x41, 0xc6, 0x1b, 0xfd, 0x9f, 0x67, 0x67, 0x22, 0x56, 0x3f, 0x0b, 0x68, 0xf5, 0x03,
    ];
    /// `gzip.compress(b"gzip member one\n", mtime=0)`.
    const GZIP: &[u8] = &[
        0x1f, 0x8b, 0x08, 0x00, 0x00, 0x00, 0x00, 0x00, 0x02, 0x03, 0x4b, 0xaf, 0xca, 0x2c, 0x50,
        0xc8, 0x4d, 0xcd, 0x4d, 0x4a, 0x2d, 0x52, 0xc8, 0xcf, 0x4b, 0xe5, 0x02, 0x00, 0x39, 0x0c,
        0x84, 0xdd, 0x10, 0x00, 0x00, 0x00,
    ];
    /// `zlib.compress(b"zlib stream\n")`.
    const ZLIB: &[u8] = &[
        0x78, 0x9c, 0xab, 0xca, 0xc9, 0x4c, 0x52, 0x28, 0x2e, 0x29, 0x4a, 0x4d, 0xcc, 0xe5, 0x02,
        0x00, 0x1e, 0xa6, 0x04, 0x68,
    ];

    /// 300 letters of a skewed alphabet, drawn by the C library's LCG.
    fn lcg_text() -> Vec<u8> {
        let alphabet = b"aaaaaabbbcdeefg \n";
        let mut x: u64 = 1;
        (0..300)
            .map(|_| {
                x = (x * 1_103_515_245 + 12_345) & 0x7fff_ffff;
                alphabet[((x >> 16) % alphabet.len() as u64) as usize]
            })
            .collect()
    }

    fn whole(result: Result<Inflated, String>) -> Vec<u8> {
        let inflated = result.unwrap();
        assert_eq!(inflated.stop, Stop::End);
        inflated.bytes
    }

    #[test]
    fn each_kind_of_block_decodes() {
        assert_eq!(whole(inflate(STORED, 1000)), b"hello, stored world\n");
        assert_eq!(
            whole(inflate(FIXED, 1000)),
            b"abcabcabcabc fixed Huffman, abcabcabc!"
        );
        assert_eq!(whole(inflate(DYNAMIC, 1000)), lcg_text());
    }

    #[test]
    fn gzip_and_zlib_wrappers_decode_and_check_their_sums() {
        assert_eq!(whole(gunzip(GZIP, 1000)), b"gzip member one\n");
        let mut two = GZIP.to_vec();
        two.extend_from_slice(GZIP);
        assert_eq!(
            whole(gunzip(&two, 1000)),
            b"gzip member one\ngzip member one\n"
        );
        assert_eq!(whole(zlib_or_raw(ZLIB, 1000)), b"zlib stream\n");
        // Raw deflate under `deflate`, as some servers send it.
        assert_eq!(whole(zlib_or_raw(FIXED, 1000)).len(), 38);

        let mut bad_crc = GZIP.to_vec();
        bad_crc[GZIP.len() - 8] ^= 1;
        assert!(gunzip(&bad_crc, 1000).unwrap_err().contains("CRC-32"));
        let mut bad_size = GZIP.to_vec();
        bad_size[GZIP.len() - 1] ^= 1;
        assert!(gunzip(&bad_size, 1000).unwrap_err().contains("length"));
        let mut bad_adler = ZLIB.to_vec();
        bad_adler[ZLIB.len() - 1] ^= 1;
        assert!(zlib_or_raw(&bad_adler, 1000)
            .unwrap_err()
            .contains("Adler-32"));
        assert!(gunzip(b"plain text", 1000)
            .unwrap_err()
            .contains("not a gzip header"));
    }

    #[test]
    fn the_cap_stops_output_and_an_early_end_is_told() {
        let cut = inflate(DYNAMIC, 100).unwrap();
        assert_eq!(cut.stop, Stop::Cap);
        assert_eq!(cut.bytes, lcg_text()[..100]);
        let cut = inflate(STORED, 5).unwrap();
        assert_eq!((cut.stop, cut.bytes.as_slice()), (Stop::Cap, &b"hello"[..]));
        let short = gunzip(&GZIP[..GZIP.len() - 3], 1000).unwrap();
        assert_eq!(short.stop, Stop::Truncated);
        assert_eq!(short.bytes, b"gzip member one\n");
        assert_eq!(inflate(&DYNAMIC[..40], 1000).unwrap().stop, Stop::Truncated);
        assert_eq!(gunzip(&GZIP[..4], 1000).unwrap().stop, Stop::Truncated);
    }

    #[test]
    fn a_bomb_stops_at_the_cap() {
        // One last fixed block: the literal "a", then 8,000 copies of 258
        // bytes at distance 1, then the end: 2 MB from 13 KB.
        let mut bits: Vec<u8> = vec![1, 1, 0];
        bits.extend([1, 0, 0, 1, 0, 0, 0, 1]); // 97, "a": 0x30 + 97
        for _ in 0..8000 {
            bits.extend([1, 1, 0, 0, 0, 1, 0, 1]); // 285: length 258
            bits.extend([0, 0, 0, 0, 0]); // distance code 0: 1
        }
        bits.extend([0; 7]); // 256: the end of the block
        let stream = pack(&bits);
        let full = inflate(&stream, usize::MAX).unwrap();
        assert_eq!((full.stop, full.bytes.len()), (Stop::End, 1 + 8000 * 258));
        let cut = inflate(&stream, 10_000).unwrap();
        assert_eq!((cut.stop, cut.bytes.len()), (Stop::Cap, 10_000));
        assert!(cut.bytes.iter().all(|b| *b == b'a'));
    }

    /// Bits (Huffman codes written most significant bit first, as deflate
    /// sends them; other fields least significant first) packed least
    /// significant first, padded with zeros to a byte.
    fn pack(bits: &[u8]) -> Vec<u8> {
        bits.chunks(8)
            .map(|byte| byte.iter().rev().fold(0u8, |acc, bit| acc << 1 | bit))
            .collect()
    }
    #[test]
    fn corrupt_streams_are_errors_not_panics() {
        // Block type 3.
        assert!(inflate(&[0x07], 100).unwrap_err().contains("reserved"));
        // A stored block whose complement is wrong.
        assert!(inflate(&[0x01, 0x01, 0x00, 0x00, 0x00], 100)
            .unwrap_err()
            .contains("complement"));
        // A back reference before the start: a fixed block whose first
        // symbol is a length.
        let mut bits = vec![1, 1, 0];
        bits.extend([0, 0, 0, 0, 0, 0, 1]); // 257: length 3
        bits.extend([0, 0, 0, 0, 0]); // distance 1
        bits.push(0);
        assert!(inflate(&pack(&bits), 100).unwrap_err().contains("far back"));
        // Flipping each bit of a real stream never panics and never
        // passes the cap.
        for stream in [STORED, FIXED, DYNAMIC] {
            for at in 0..stream.len() * 8 {
                let mut broken = stream.to_vec();
                broken[at / 8] ^= 1 << (at % 8);
                if let Ok(inflated) = inflate(&broken, 400) {
                    assert!(inflated.bytes.len() <= 400);
                }
            }
        }
    }

    #[test]
    fn checksums_match_their_standard_check_values() {
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(&vec![0xff; 100_000]), {
            let (mut a, mut b) = (1u64, 0u64);
            for _ in 0..100_000 {
                a = (a + 0xff) % 65_521;
                b = (b + a) % 65_521;
            }
            (b << 16 | a) as u32
        });
    }
}
