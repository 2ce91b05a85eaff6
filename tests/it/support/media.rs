//! Bytes for rich-content tests: standard base64 and tiny but real PNG
//! images (signature, IHDR, a zlib-wrapped stored IDAT, IEND, with correct
//! CRCs), built here so that no fixture file is needed.

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding (RFC 4648 §4).
pub fn base64(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for group in bytes.chunks(3) {
        let n = (u32::from(group[0]) << 16)
            | (u32::from(group.get(1).copied().unwrap_or(0)) << 8)
            | u32::from(group.get(2).copied().unwrap_or(0));
        let sextet = |shift: u32| ALPHABET[((n >> shift) & 63) as usize] as char;
        out.push(sextet(18));
        out.push(sextet(12));
        out.push(if group.len() > 1 { sextet(6) } else { '=' });
        out.push(if group.len() > 2 { sextet(0) } else { '=' });
    }
    out
}

/// CRC-32 (ISO 3309, the one PNG uses), bit by bit: small and fast enough
/// for a few dozen bytes.
fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xffff_ffffu32;
    for byte in bytes {
        crc ^= u32::from(*byte);
        for _ in 0..8 {
            crc = if crc & 1 == 1 {
                (crc >> 1) ^ 0xedb8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

fn adler32(bytes: &[u8]) -> u32 {
    let (mut a, mut b) = (1u32, 0u32);
    for byte in bytes {
        a = (a + u32::from(*byte)) % 65_521;
        b = (b + a) % 65_521;
    }
    (b << 16) | a
}

fn png_chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&(data.len() as u32).to_be_bytes());
    let mut covered = kind.to_vec();
    covered.extend_from_slice(data);
    out.extend_from_slice(&covered);
    out.extend_from_slice(&crc32(&covered).to_be_bytes());
}

/// A valid 1×1 RGB PNG of the given colour.
pub fn png(red: u8, green: u8, blue: u8) -> Vec<u8> {
    let mut out = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut header = Vec::new();
    header.extend_from_slice(&1u32.to_be_bytes()); // width
    header.extend_from_slice(&1u32.to_be_bytes()); // height
    header.extend_from_slice(&[8, 2, 0, 0, 0]); // 8-bit RGB, no interlace
    png_chunk(&mut out, b"IHDR", &header);
    // One scanline: filter byte 0, then the pixel.
    let raw = [0u8, red, green, blue];
    let mut zlib = vec![0x78, 0x01, 0x01]; // zlib header, final stored block
    zlib.extend_from_slice(&(raw.len() as u16).to_le_bytes());
    zlib.extend_from_slice(&(!(raw.len() as u16)).to_le_bytes());
    zlib.extend_from_slice(&raw);
    zlib.extend_from_slice(&adler32(&raw).to_be_bytes());
    png_chunk(&mut out, b"IDAT", &zlib);
    png_chunk(&mut out, b"IEND", &[]);
    out
}

#[test]
fn base64_and_png_are_right() {
    assert_eq!(base64(b""), "");
    assert_eq!(base64(b"f"), "Zg==");
    assert_eq!(base64(b"fo"), "Zm8=");
    assert_eq!(base64(b"foo"), "Zm9v");
    assert_eq!(base64(b"foobar"), "Zm9vYmFy");
    // The CRC of "IEND" with no data is fixed in every PNG file.
    assert_eq!(crc32(b"IEND"), 0xae42_6082);
    assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
    let image = png(255, 0, 0);
    assert!(image.starts_with(b"\x89PNG\r\n\x1a\n"));
    assert!(image.ends_with(&[0xae, 0x42, 0x60, 0x82]));
    assert_ne!(png(1, 2, 3), png(3, 2, 1));
}
