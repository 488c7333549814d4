//! Versioned record encoding. Every stored value is one format byte followed by its postcard
//! encoding; a reader refuses a version it does not know instead of misreading it.

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::error::{Error, Result};

/// Version byte of every record this build writes. Bump it (and keep a reader for the old one)
/// when a persisted type changes shape.
pub const RECORD_FORMAT: u8 = 1;

/// Encodes `value` as a versioned record.
pub fn encode<T: Serialize>(value: &T) -> Vec<u8> {
    // Serialising our own model types into a Vec cannot fail: no type of ours has a
    // serialiser that errors, and a Vec grows as needed.
    postcard::to_extend(value, vec![RECORD_FORMAT]).expect("postcard encoding into a Vec")
}

/// Decodes a versioned record, naming `table` in the error.
pub fn decode<T: DeserializeOwned>(table: &'static str, bytes: &[u8]) -> Result<T> {
    match bytes.split_first() {
        Some((&RECORD_FORMAT, rest)) => postcard::from_bytes(rest).map_err(|e| Error::Corrupt {
            table,
            message: e.to_string(),
        }),
        Some((v, _)) => Err(Error::Corrupt {
            table,
            message: format!("record format {v}, this build reads format {RECORD_FORMAT}"),
        }),
        None => Err(Error::Corrupt {
            table,
            message: "empty record".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refuses_unknown_version() {
        let mut bytes = encode(&42u64);
        assert_eq!(decode::<u64>("t", &bytes).unwrap(), 42);
        bytes[0] = 9;
        let err = decode::<u64>("t", &bytes).unwrap_err().to_string();
        assert!(err.contains("format 9"), "{err}");
    }
}
