//! WebSocket (RFC 6455) as `serve` needs it, server side: the upgrade's
//! answer, and frames read and written over blocking sockets. A message is
//! one JSON-RPC message in one text frame or a run of fragments; its size
//! is capped before it is read, a client's frames must be masked, and a
//! binary frame or a broken one ends the socket with the close code that
//! says why.

use std::io::{self, Read, Write};

/// The GUID every server appends to the client's key (RFC 6455 1.3).
const GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// The `Sec-WebSocket-Accept` answer to a client's `Sec-WebSocket-Key`.
pub(crate) fn accept_key(key: &str) -> String {
    let digest = ring::digest::digest(
        &ring::digest::SHA1_FOR_LEGACY_USE_ONLY,
        format!("{}{GUID}", key.trim()).as_bytes(),
    );
    crate::util::base64_encode(digest.as_ref())
}

/// Whether `key` is a well-formed key: 16 bytes in base64.
pub(crate) fn key_is_valid(key: &str) -> bool {
    crate::util::base64_decode(key.trim()).is_some_and(|bytes| bytes.len() == 16)
}

/// What a client sent, as far as the connection cares.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Incoming {
    Text(String),
    Ping(Vec<u8>),
    Pong,
    /// The client closes, with its code if it gave one.
    Close(Option<u16>),
}

/// Why the socket must end; the close code to send with the reason.
#[derive(Debug)]
pub(crate) enum FrameError {
    /// The socket ended or failed; nothing to send.
    Gone(io::Error),
    /// The client broke the protocol: close with `code` and `why`.
    Refused(u16, &'static str),
}

impl From<io::Error> for FrameError {
    fn from(error: io::Error) -> Self {
        FrameError::Gone(error)
    }
}

/// Close codes (RFC 6455 7.4.1).
pub(crate) const PROTOCOL_ERROR: u16 = 1002;
pub(crate) const UNSUPPORTED: u16 = 1003;
pub(crate) const NOT_UTF8: u16 = 1007;
pub(crate) const TOO_BIG: u16 = 1009;
pub(crate) const GOING_AWAY: u16 = 1001;
pub(crate) const NORMAL: u16 = 1000;

/// Reads frames until one message (or control frame) is complete; a
/// message over `cap` bytes is refused before its payload is read.
/// `message` holds a fragmented message across the control frames that
/// may come between its fragments.
pub(crate) fn read_message(
    input: &mut impl Read,
    message: &mut Option<Vec<u8>>,
    cap: usize,
) -> Result<Incoming, FrameError> {
    loop {
        let mut head = [0u8; 2];
        input.read_exact(&mut head)?;
        let fin = head[0] & 0x80 != 0;
        if head[0] & 0x70 != 0 {
            return Err(FrameError::Refused(PROTOCOL_ERROR, "reserved bits are set"));
        }
        let opcode = head[0] & 0x0f;
        if head[1] & 0x80 == 0 {
            return Err(FrameError::Refused(
                PROTOCOL_ERROR,
                "a client's frames must be masked",
            ));
        }
        let length = match head[1] & 0x7f {
            126 => {
                let mut bytes = [0u8; 2];
                input.read_exact(&mut bytes)?;
                u64::from(u16::from_be_bytes(bytes))
            }
            127 => {
                let mut bytes = [0u8; 8];
                input.read_exact(&mut bytes)?;
                u64::from_be_bytes(bytes)
            }
            short => u64::from(short),
        };
        let control = opcode >= 8;
        if control && (length > 125 || !fin) {
            return Err(FrameError::Refused(
                PROTOCOL_ERROR,
                "a malformed control frame",
            ));
        }
        let so_far = message.as_ref().map_or(0, Vec::len) as u64;
        if !control && so_far.saturating_add(length) > cap as u64 {
            return Err(FrameError::Refused(TOO_BIG, "the message is too large"));
        }
        let mut mask = [0u8; 4];
        input.read_exact(&mut mask)?;
        let mut payload = vec![0u8; length as usize];
        input.read_exact(&mut payload)?;
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
        match opcode {
            0x8 => {
                let code =
                    (payload.len() >= 2).then(|| u16::from_be_bytes([payload[0], payload[1]]));
                return Ok(Incoming::Close(code));
            }
            0x9 => return Ok(Incoming::Ping(payload)),
            0xA => return Ok(Incoming::Pong),
            0x1 if message.is_none() => *message = Some(payload),
            0x0 if message.is_some() => {
                if let Some(message) = message.as_mut() {
                    message.extend_from_slice(&payload);
                }
            }
            0x2 => {
                return Err(FrameError::Refused(
                    UNSUPPORTED,
                    "binary frames are not understood: send JSON-RPC as text",
                ))
            }
            0x0 | 0x1 => {
                return Err(FrameError::Refused(
                    PROTOCOL_ERROR,
                    "a fragment out of order",
                ))
            }
            _ => return Err(FrameError::Refused(PROTOCOL_ERROR, "an unknown opcode")),
        }
        if fin {
            let bytes = message.take().unwrap_or_default();
            return String::from_utf8(bytes)
                .map(Incoming::Text)
                .map_err(|_| FrameError::Refused(NOT_UTF8, "a text message that is not UTF-8"));
        }
    }
}

/// Writes one unmasked frame with `opcode` and `payload`.
pub(crate) fn write_frame(out: &mut impl Write, opcode: u8, payload: &[u8]) -> io::Result<()> {
    let mut frame = Vec::with_capacity(payload.len() + 10);
    frame.push(0x80 | opcode);
    match payload.len() {
        n if n < 126 => frame.push(n as u8),
        n if n <= usize::from(u16::MAX) => {
            frame.push(126);
            frame.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            frame.push(127);
            frame.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    frame.extend_from_slice(payload);
    out.write_all(&frame)?;
    out.flush()
}

/// A close frame's payload: the code and a reason (cut to fit 125 bytes).
pub(crate) fn close_payload(code: u16, why: &str) -> Vec<u8> {
    let mut payload = code.to_be_bytes().to_vec();
    let mut end = why.len().min(123);
    while !why.is_char_boundary(end) {
        end -= 1;
    }
    payload.extend_from_slice(&why.as_bytes()[..end]);
    payload
}

#[cfg(test)]
mod tests {
    use super::*;

    fn masked(first: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut frame = vec![first];
        match payload.len() {
            n if n < 126 => frame.push(0x80 | n as u8),
            n => {
                frame.push(0x80 | 126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        frame.extend_from_slice(&mask);
        frame.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        frame
    }

    #[test]
    fn the_accept_key_is_the_rfcs_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
        assert!(key_is_valid("dGhlIHNhbXBsZSBub25jZQ=="));
        assert!(!key_is_valid("short"));
    }

    #[test]
    fn fragments_join_and_controls_pass_between_them() {
        let mut bytes = masked(0x01, b"{\"a\":");
        bytes.extend(masked(0x89, b"hi"));
        bytes.extend(masked(0x80, b"1}"));
        let (mut input, mut partial) = (&bytes[..], None);
        assert_eq!(
            read_message(&mut input, &mut partial, 64).unwrap(),
            Incoming::Ping(b"hi".to_vec())
        );
        assert_eq!(
            read_message(&mut input, &mut partial, 64).unwrap(),
            Incoming::Text("{\"a\":1}".into())
        );
    }

    #[test]
    fn bad_frames_close_with_their_code() {
        let code = |bytes: Vec<u8>, cap| match read_message(&mut &bytes[..], &mut None, cap) {
            Err(FrameError::Refused(code, _)) => code,
            other => panic!("{other:?}"),
        };
        assert_eq!(code(masked(0x82, b"x"), 64), UNSUPPORTED);
        assert_eq!(code(masked(0x81, &[0xff, 0xfe]), 64), NOT_UTF8);
        assert_eq!(code(masked(0x81, &[b'x'; 200]), 64), TOO_BIG);
        assert_eq!(code(vec![0x81, 0x01, b'x'], 64), PROTOCOL_ERROR);
        assert_eq!(code(masked(0xC1, b"x"), 64), PROTOCOL_ERROR);
        assert_eq!(code(masked(0x80, b"x"), 64), PROTOCOL_ERROR);
        assert_eq!(code(masked(0x09, b"x"), 64), PROTOCOL_ERROR);
        // A huge length is refused from the header, before any allocation.
        let mut huge = vec![0x81, 0x80 | 127];
        huge.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(code(huge, 64), TOO_BIG);
        // The same after a first fragment: the sum saturates, not wraps.
        let mut wraps = masked(0x01, b"{");
        wraps.extend_from_slice(&[0x80, 0x80 | 127]);
        wraps.extend_from_slice(&u64::MAX.to_be_bytes());
        assert_eq!(code(wraps, 64), TOO_BIG);
    }

    #[test]
    fn frames_written_carry_their_length() {
        let mut out = Vec::new();
        write_frame(&mut out, 1, &[b'a'; 300]).unwrap();
        assert_eq!(&out[..4], &[0x81, 126, 1, 44]);
        assert_eq!(close_payload(1000, "ok"), vec![3, 232, b'o', b'k']);
    }
}
