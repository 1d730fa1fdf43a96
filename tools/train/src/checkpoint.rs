//! Tensors to and from safetensors files, written atomically (temp file in the
//! same directory, fsync, rename, fsync of the directory): a kill at any point
//! leaves the old file or the new one, never a torn one. A file that is torn
//! anyway (copied half, disk full) is refused with a message; train never
//! silently starts over.

use anyhow::Context;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::io::Write;
use std::path::Path;
use tch::{Device, Kind, Tensor};

/// Host copies of the tensors, in the byte layout safetensors stores.
struct Owned {
    name: String,
    dtype: Dtype,
    shape: Vec<usize>,
    bytes: Vec<u8>,
}

fn to_owned(name: &str, t: &Tensor) -> anyhow::Result<Owned> {
    let t = t.to_device(Device::Cpu).contiguous();
    let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
    let n = t.numel();
    let (dtype, bytes) = match t.kind() {
        Kind::Int64 => {
            let mut v = vec![0i64; n];
            t.f_copy_data(&mut v, n)?;
            (Dtype::I64, v.iter().flat_map(|x| x.to_le_bytes()).collect())
        }
        _ => {
            let t = t.to_kind(Kind::Float);
            let mut v = vec![0f32; n];
            t.f_copy_data(&mut v, n)?;
            (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect())
        }
    };
    Ok(Owned {
        name: name.to_string(),
        dtype,
        shape,
        bytes,
    })
}

/// Writes `tensors` and `metadata` to `path` atomically.
pub fn save(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let owned = tensors
        .iter()
        .map(|(n, t)| to_owned(n, t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let views = owned
        .iter()
        .map(|o| {
            Ok((
                o.name.clone(),
                TensorView::new(o.dtype, o.shape.clone(), &o.bytes)?,
            ))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    let bytes = safetensors::tensor::serialize(views, Some(metadata.into_iter().collect()))?;
    write_atomic(path, &bytes)
}

/// temp file, fsync, rename, fsync of the directory.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = path.file_name().context("a file name")?.to_string_lossy();
    let tmp = dir.join(format!(".{name}.tmp"));
    {
        let mut f =
            std::fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))?;
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

pub struct Loaded {
    pub tensors: HashMap<String, Tensor>,
    pub metadata: HashMap<String, String>,
}

/// Reads a file written by `save` (or any safetensors file of f32/i64).
pub fn load(path: &Path) -> anyhow::Result<Loaded> {
    let name = path.display();
    let bytes = std::fs::read(path).map_err(|e| common::bad_input!("{name}: cannot read: {e}"))?;
    let st = SafeTensors::deserialize(&bytes).map_err(|e| {
        common::bad_input!("{name}: not a complete safetensors file ({e}); it may be truncated. Refusing to start over from it")
    })?;
    let (_, meta) =
        SafeTensors::read_metadata(&bytes).map_err(|e| common::bad_input!("{name}: {e}"))?;
    let mut tensors = HashMap::new();
    for (tname, view) in st.tensors() {
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let data = view.data();
        let t = match view.dtype() {
            Dtype::F32 => {
                let v: Vec<f32> = data
                    .chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                Tensor::from_slice(&v)
            }
            Dtype::I64 => {
                let v: Vec<i64> = data
                    .chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap()))
                    .collect();
                Tensor::from_slice(&v)
            }
            other => {
                return Err(common::bad_input!(
                    "{name}: tensor `{tname}`: expected F32 or I64, found {other:?}"
                ))
            }
        };
        tensors.insert(tname, t.reshape(&shape));
    }
    Ok(Loaded {
        tensors,
        metadata: meta.metadata().clone().unwrap_or_default(),
    })
}
