//! Standard base64 (RFC 4648, with padding) for `encoding: "base64"`, the
//! MCP cursor and recorded images: the `base64` crate, with what the hub
//! adds around it. Decoding is lenient in the ways people need (padding
//! optional, ASCII whitespace ignored: pasted base64 is often wrapped) and
//! its errors are sentences.

use base64::engine::general_purpose::{GeneralPurpose, PAD_INDIFFERENT};
use base64::{alphabet, DecodeError, Engine};

/// Writes padding; reads padded or unpadded input and ignores bits left
/// over in the last symbol (what encoders that truncate write).
const ENGINE: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    PAD_INDIFFERENT.with_decode_allow_trailing_bits(true),
);

pub fn encode(bytes: &[u8]) -> String {
    ENGINE.encode(bytes)
}

/// Decodes padded or unpadded standard base64; ASCII whitespace is ignored.
/// The error names the first bad offset (counted without the whitespace).
pub fn decode(text: &str) -> Result<Vec<u8>, String> {
    let decoded = if text.bytes().any(|b| b.is_ascii_whitespace()) {
        let packed: Vec<u8> = text.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
        ENGINE.decode(packed)
    } else {
        ENGINE.decode(text)
    };
    decoded.map_err(|e| match e {
        DecodeError::InvalidByte(offset, b'=') => {
            format!("base64 data continues after '=' at offset {offset}")
        }
        DecodeError::InvalidByte(offset, _) => {
            format!("invalid base64 character at offset {offset}")
        }
        DecodeError::InvalidLastSymbol { offset, .. } => {
            format!("invalid base64 character at offset {offset}")
        }
        DecodeError::InvalidLength(_) | DecodeError::InvalidPadding => {
            "base64 data has an impossible length".to_string()
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrips_every_tail_length() {
        let data: Vec<u8> = (0..=255u8).collect();
        for n in 0..8 {
            let enc = encode(&data[..n]);
            assert_eq!(enc.len() % 4, 0);
            assert_eq!(decode(&enc).as_deref(), Ok(&data[..n]));
        }
        assert_eq!(encode(b"foobar"), "Zm9vYmFy");
        assert_eq!(encode(b"fo"), "Zm8=");
        assert_eq!(decode("Zm9v\nYmE=").as_deref(), Ok(&b"fooba"[..]));
        assert_eq!(decode("Zm8").as_deref(), Ok(&b"fo"[..]));
        assert_eq!(decode(" Zm9v\r\n YmFy\n").as_deref(), Ok(&b"foobar"[..]));
        // Bits left over in the last symbol are ignored, as before.
        assert_eq!(decode("Zm9=").as_deref(), Ok(&b"fo"[..]));
    }

    #[test]
    fn rejects_garbage() {
        assert_eq!(
            decode("Zm9v!"),
            Err("invalid base64 character at offset 4".into())
        );
        assert!(decode("Zm8=Zm8=").is_err());
        assert!(decode("Z").is_err());
    }
}
