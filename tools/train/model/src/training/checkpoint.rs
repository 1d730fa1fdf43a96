//! How to save (when to save is `strategy`): tensors to and from safetensors
//! files, written atomically (common::files), with the checkpoint's metadata
//! as one typed struct (`CheckpointMeta`, train-checkpoint/v1). A file that
//! is torn anyway (copied half, disk full) is refused with a message; train
//! never silently starts over.

use crate::system::tensor_bytes;
use common::wire::run_dir::RunDir;
use common::wire::train::CheckpointMeta;
use safetensors::tensor::{Dtype, SafeTensors, TensorView};
use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use tch::{Kind, Tensor};

/// Writes `tensors` (f32, or i64 kept as i64) and `metadata` to `path`
/// atomically.
pub fn save(
    path: &Path,
    tensors: &[(String, Tensor)],
    metadata: BTreeMap<String, String>,
) -> anyhow::Result<()> {
    let owned = tensors
        .iter()
        .map(|(n, t)| {
            let (t, dtype) = match t.kind() {
                Kind::Int64 => (t.shallow_clone(), Dtype::I64),
                _ => (t.to_kind(Kind::Float), Dtype::F32),
            };
            let shape: Vec<usize> = t.size().iter().map(|&d| d as usize).collect();
            Ok((n.clone(), dtype, shape, tensor_bytes::to_le(&t)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let views = owned
        .iter()
        .map(|(n, dtype, shape, bytes)| {
            Ok((n.clone(), TensorView::new(*dtype, shape.clone(), bytes)?))
        })
        .collect::<Result<Vec<_>, safetensors::SafeTensorError>>()?;
    let bytes = safetensors::tensor::serialize(views, Some(metadata.into_iter().collect()))?;
    common::files::write_atomic(path, &bytes)
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
        let kind = match view.dtype() {
            Dtype::F32 => Kind::Float,
            Dtype::I64 => Kind::Int64,
            other => {
                return Err(common::bad_input!(
                    "{name}: tensor `{tname}`: expected F32 or I64, found {other:?}"
                ))
            }
        };
        let shape: Vec<i64> = view.shape().iter().map(|&d| d as i64).collect();
        let t = tensor_bytes::from_le(view.data(), &shape, kind)
            .map_err(|e| common::bad_input!("{name}: tensor `{tname}`: {e}"))?;
        tensors.insert(tname, t);
    }
    Ok(Loaded {
        tensors,
        metadata: meta.metadata().clone().unwrap_or_default(),
    })
}

/// The epoch of the checkpoint in run directory `run`, None when it has
/// none; read from the header alone.
pub fn epoch_in(run: &RunDir) -> anyhow::Result<Option<u32>> {
    let path = run.checkpoint();
    if !path.exists() {
        return Ok(None);
    }
    let name = path.display().to_string();
    let mut f =
        std::fs::File::open(&path).map_err(|e| common::bad_input!("{name}: cannot read: {e}"))?;
    let (_, mut header) = common::tensor_headers::safetensors_header(&mut f, &name)?;
    let metadata: HashMap<String, String> = match header.remove("__metadata__") {
        Some(m) => serde_json::from_value(m)
            .map_err(|e| common::bad_input!("{name}: `__metadata__`: {e}"))?,
        None => HashMap::new(),
    };
    Ok(Some(CheckpointMeta::from_map(&name, &metadata)?.epoch))
}

/// The run directory's checkpoint files: the last epoch's full state, and
/// the best model's weights.
pub struct Checkpointer {
    run: RunDir,
}

impl Checkpointer {
    pub fn new(run: RunDir) -> Checkpointer {
        Checkpointer { run }
    }

    pub fn path(&self) -> PathBuf {
        self.run.checkpoint()
    }

    /// The weights, the optimizer's state and the metadata, as one file.
    pub fn save(&self, tensors: &[(String, Tensor)], meta: &CheckpointMeta) -> anyhow::Result<()> {
        save(&self.path(), tensors, meta.to_map())
    }

    /// The best model's weights (loadable by PyTorch without the rest).
    pub fn save_best(&self, weights: &[(String, Tensor)]) -> anyhow::Result<()> {
        save(&self.run.best_weights(), weights, BTreeMap::new())
    }

    /// The last checkpoint with its metadata read and checked.
    pub fn load(&self) -> anyhow::Result<(Loaded, CheckpointMeta)> {
        let path = self.path();
        let loaded = load(&path)?;
        let meta = CheckpointMeta::from_map(&path.display().to_string(), &loaded.metadata)?;
        Ok((loaded, meta))
    }
}
