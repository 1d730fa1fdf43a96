//! Tensors to and from the little-endian bytes that safetensors and numpy
//! store (x86-64 and arm64 are little-endian, so libtorch's memory is that
//! layout already): one place for the checkpoint and the data files.

use tch::{Device, Kind, Tensor};

/// The kinds files hold: f32 and i64.
pub fn elem_bytes(kind: Kind) -> usize {
    kind.elt_size_in_bytes()
}

/// A CPU tensor of `shape` and `kind` from exactly its bytes.
pub fn from_le(bytes: &[u8], shape: &[i64], kind: Kind) -> Result<Tensor, String> {
    let numel: i64 = shape.iter().product();
    let want = numel as usize * elem_bytes(kind);
    if bytes.len() != want || shape.iter().any(|&d| d < 0) {
        return Err(format!(
            "{} bytes of data for shape {shape:?} of {kind:?} ({want} expected)",
            bytes.len()
        ));
    }
    Tensor::f_from_data_size(bytes, shape, kind).map_err(|e| e.to_string())
}

/// The tensor's bytes on the host, contiguous.
pub fn to_le(t: &Tensor) -> Result<Vec<u8>, tch::TchError> {
    let t = t.to_device(Device::Cpu).contiguous();
    let n = t.numel();
    let mut out = vec![0u8; n * elem_bytes(t.kind())];
    t.f_copy_data_u8(&mut out, n)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_a_short_buffer() {
        let t = Tensor::from_slice(&[1.5f32, -2.0, 3.25, 0.0]).reshape([2, 2]);
        let b = to_le(&t).unwrap();
        assert_eq!(&b[..4], &1.5f32.to_le_bytes());
        let back = from_le(&b, &[2, 2], Kind::Float).unwrap();
        assert!(back.equal(&t));
        let i = Tensor::from_slice(&[7i64, -1]);
        assert!(from_le(&to_le(&i).unwrap(), &[2], Kind::Int64)
            .unwrap()
            .equal(&i));
        assert!(from_le(&b[..12], &[2, 2], Kind::Float).is_err());
    }
}
