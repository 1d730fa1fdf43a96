//! The headers of the tensor files a user hands to `train` (safetensors;
//! numpy's .npy, inside an .npz), read without their data and without
//! libtorch, so that they are tested and fuzzed on their own. Each length a
//! file declares is checked before anything that size is allocated.

use crate::bad_input;
use std::collections::HashMap;
use std::io::Read;

/// The largest safetensors header read (the format's own limit is 100 MB).
pub const MAX_SAFETENSORS_HEADER: u64 = 100 << 20;
/// The largest .npy header read: numpy writes a few hundred bytes.
pub const MAX_NPY_HEADER: usize = 1 << 20;

/// A tensor's dtype (safetensors' names: F32, I64, ...; `numpy <descr>` for
/// another numpy type) and shape.
#[derive(Clone, Debug, PartialEq)]
pub struct TensorInfo {
    pub dtype: String,
    pub shape: Vec<i64>,
}

/// A safetensors file's header: where the data starts, and the header's
/// entries (each tensor's dtype, shape and offsets, and `__metadata__`).
/// `name` names the file in messages.
pub fn safetensors_header(
    r: &mut impl Read,
    name: &str,
) -> anyhow::Result<(u64, HashMap<String, serde_json::Value>)> {
    let mut len = [0u8; 8];
    r.read_exact(&mut len)
        .map_err(|_| bad_input!("{name}: not a safetensors file (shorter than its header)"))?;
    let header_len = u64::from_le_bytes(len);
    if header_len > MAX_SAFETENSORS_HEADER {
        return Err(bad_input!(
            "{name}: not a safetensors file (header length {header_len})"
        ));
    }
    let mut header = Vec::new();
    r.take(header_len)
        .read_to_end(&mut header)
        .map_err(|e| bad_input!("{name}: cannot read the safetensors header: {e}"))?;
    if header.len() as u64 != header_len {
        return Err(bad_input!("{name}: truncated safetensors header"));
    }
    let entries = serde_json::from_slice(&header)
        .map_err(|e| bad_input!("{name}: not a safetensors header: {e}"))?;
    Ok((8 + header_len, entries))
}

/// Parses an .npy header: magic, version, then a Python dict literal with
/// 'descr', 'fortran_order' and 'shape'. The reader is left at the data.
pub fn npy_header(r: &mut impl Read) -> Result<TensorInfo, String> {
    let mut magic = [0u8; 8];
    r.read_exact(&mut magic)
        .map_err(|e| format!("truncated .npy header: {e}"))?;
    if &magic[..6] != b"\x93NUMPY" {
        return Err("not an .npy array (bad magic)".into());
    }
    let len = if magic[6] == 1 {
        let mut l = [0u8; 2];
        r.read_exact(&mut l).map_err(|e| e.to_string())?;
        u16::from_le_bytes(l) as usize
    } else {
        let mut l = [0u8; 4];
        r.read_exact(&mut l).map_err(|e| e.to_string())?;
        u32::from_le_bytes(l) as usize
    };
    if len > MAX_NPY_HEADER {
        return Err(format!(
            "an .npy header of {len} bytes (numpy writes a few hundred): not an .npy array"
        ));
    }
    let mut header = vec![0u8; len];
    r.read_exact(&mut header)
        .map_err(|e| format!("truncated .npy header: {e}"))?;
    let header = String::from_utf8_lossy(&header);
    let field = |key: &str| -> Option<&str> {
        let at = header.find(&format!("'{key}':"))? + key.len() + 3;
        Some(header[at..].trim_start())
    };
    let descr = field("descr")
        .and_then(|d| d.strip_prefix('\''))
        .and_then(|d| d.split('\'').next())
        .ok_or("no 'descr'")?;
    if field("fortran_order").is_some_and(|f| f.starts_with("True")) {
        return Err(
            "Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into(),
        );
    }
    let shape = field("shape")
        .and_then(|s| s.strip_prefix('('))
        .and_then(|s| s.split(')').next())
        .ok_or("no 'shape'")?;
    let shape = shape
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(|d| {
            d.parse::<i64>()
                .ok()
                .filter(|n| *n >= 0)
                .ok_or_else(|| format!("bad shape entry {d:?}"))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let dtype = match descr {
        "<f4" => "F32".to_string(),
        "<i8" => "I64".to_string(),
        other => format!("numpy {other}"),
    };
    Ok(TensorInfo { dtype, shape })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_lengths_are_checked_before_allocating() {
        let mut huge = b"\x93NUMPY\x02\x00".to_vec();
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(npy_header(&mut huge.as_slice())
            .unwrap_err()
            .contains("bytes"));
        let mut st = (50u64 << 20).to_le_bytes().to_vec();
        st.extend_from_slice(b"{}");
        let e = safetensors_header(&mut st.as_slice(), "x.safetensors").unwrap_err();
        assert!(format!("{e}").contains("truncated"), "{e}");
    }

    #[test]
    fn a_numpy_header_is_read() {
        let dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }";
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        let info = npy_header(&mut b.as_slice()).unwrap();
        assert_eq!(
            info,
            TensorInfo {
                dtype: "F32".into(),
                shape: vec![3, 2]
            }
        );
        let neg = dict.replace("(3, 2)", "(-3, 2)");
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(neg.len() as u16).to_le_bytes());
        b.extend_from_slice(neg.as_bytes());
        assert!(npy_header(&mut b.as_slice()).is_err());
    }
}
