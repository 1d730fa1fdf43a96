//! Training data: the built-in synthetic set (deterministic from the seed,
//! with a real signal to learn) or a safetensors file holding
//! `frames [N,T,C,H,W]`, `scalars [N,S]`, `target [N]`. Shapes and dtypes are
//! checked against the config before anything is trained, and
//! `max_train_examples` / `max_val_examples` are honoured while reading: only
//! the first rows are read from disk (seed 002).

use common::bad_input;
use common::config::{Config, Task};
use common::tensor_headers::{npy_header, TensorInfo as Info};
use serde::Deserialize;
use std::collections::{BTreeMap, HashMap};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use tch::{Device, Kind, Tensor};

pub struct Dataset {
    pub frames: Tensor,
    pub scalars: Tensor,
    /// Float for regression, int64 for classification.
    pub target: Tensor,
}

impl Dataset {
    pub fn len(&self) -> i64 {
        self.frames.size()[0]
    }

    pub fn to(&self, device: Device) -> Dataset {
        Dataset {
            frames: self.frames.to_device(device),
            scalars: self.scalars.to_device(device),
            target: self.target.to_device(device),
        }
    }

    pub fn batch(&self, idx: &Tensor) -> (Tensor, Tensor, Tensor) {
        (
            self.frames.index_select(0, idx),
            self.scalars.index_select(0, idx),
            self.target.index_select(0, idx),
        )
    }
}

/// The training and validation sets the config asks for.
pub fn load(c: &Config) -> anyhow::Result<(Dataset, Dataset)> {
    let cap = |n: u64, max: Option<u64>| max.map_or(n, |m| m.min(n));
    match &c.data.path {
        None => Ok((
            synthetic(
                c,
                cap(c.data.synthetic_train_examples, c.max_train_examples),
                0,
            ),
            synthetic(c, cap(c.data.synthetic_val_examples, c.max_val_examples), 1),
        )),
        Some(path) => {
            let train = read_file(c, path, c.max_train_examples)?;
            let val_path = c.data.val_path.as_ref().ok_or_else(|| {
                bad_input!("config: `data.val_path`: expected a validation file beside data.path")
            })?;
            let val = read_file(c, val_path, c.max_val_examples)?;
            Ok((train, val))
        }
    }
}

/// Frames hold a bright blob whose strength is a latent variable; the target
/// is that latent plus a smooth function of the scalar inputs, plus noise.
/// A CNN learns it in a few epochs (R² well above 0.5). Classification bins
/// the same target into `num_labels` classes of about equal size.
pub fn synthetic(c: &Config, n: u64, split: i64) -> Dataset {
    let _guard = tch::no_grad_guard();
    tch::manual_seed(c.seed as i64 * 1000 + split);
    let n = n as i64;
    let (t, ch, s) = (
        c.temporal_frames as i64,
        c.image_channels as i64,
        c.image_size as i64,
    );
    let opts = (Kind::Float, Device::Cpu);
    let latent = Tensor::randn([n], opts);
    // A Gaussian blob in channel 0, brighter in later frames.
    let coords = Tensor::arange(s, opts) - (s as f64 - 1.0) / 2.0;
    let r2 = coords.unsqueeze(0).square() + coords.unsqueeze(1).square();
    let blob = (r2 / (-2.0 * (s as f64 / 6.0).powi(2))).exp();
    let ramp = Tensor::arange(t, opts) * 0.1 + 1.0;
    let signal = Tensor::zeros([n, t, ch, s, s], opts);
    let strength = latent.view([n, 1, 1, 1]) * ramp.view([1, t, 1, 1]);
    signal
        .select(2, 0)
        .copy_(&(strength * blob.view([1, 1, s, s])));
    let frames = signal + Tensor::randn([n, t, ch, s, s], opts) * 0.5;
    let sf = c.scalar_features as i64;
    let scalars = Tensor::randn([n, sf], opts);
    let mut target = latent + Tensor::randn([n], opts) * 0.1;
    if sf > 0 {
        // Fixed weights for the scalar part, the same for train and val.
        tch::manual_seed(c.seed as i64 * 1000 + 999);
        let w = Tensor::randn([sf], opts) / (sf as f64).sqrt();
        target += scalars.matmul(&w).tanh() * 0.5;
    }
    let target = match c.task {
        Task::Regression => target,
        Task::Classification => {
            // Equal-mass bins of a N(0, ~1.1) variable by its quantiles.
            let k = c.num_labels as i64;
            let sorted = target.sort(0, false).0;
            let edges: Vec<f64> = (1..k)
                .map(|i| sorted.double_value(&[(i * n / k).min(n - 1)]))
                .collect();
            let mut label = Tensor::zeros([n], (Kind::Int64, Device::Cpu));
            for e in edges {
                label += target.gt(e).to_kind(Kind::Int64);
            }
            label
        }
    };
    Dataset {
        frames,
        scalars,
        target,
    }
}

/// A file of named tensors whose first rows can be read without the rest.
trait Source {
    fn info(&mut self, tensor: &str) -> anyhow::Result<Info>;
    /// The first `bytes` bytes of `tensor`'s data (row-major).
    fn head(&mut self, tensor: &str, bytes: usize) -> anyhow::Result<Vec<u8>>;
}

/// safetensors: a JSON header of offsets, then the data.
struct SafetensorsFile {
    name: String,
    file: std::fs::File,
    body: u64,
    infos: HashMap<String, serde_json::Value>,
}

#[derive(Deserialize)]
struct StInfo {
    dtype: String,
    shape: Vec<i64>,
    data_offsets: [u64; 2],
}

impl SafetensorsFile {
    fn open(path: &Path) -> anyhow::Result<SafetensorsFile> {
        let name = path.display().to_string();
        let mut file =
            std::fs::File::open(path).map_err(|e| bad_input!("{name}: cannot open: {e}"))?;
        let (body, mut infos) = common::tensor_headers::safetensors_header(&mut file, &name)?;
        infos.remove("__metadata__");
        Ok(SafetensorsFile {
            name,
            file,
            body,
            infos,
        })
    }

    fn st_info(&self, t: &str) -> anyhow::Result<StInfo> {
        let name = &self.name;
        let v = self.infos.get(t).ok_or_else(|| {
            bad_input!(
                "{name}: no tensor `{t}`; expected frames [N,T,C,H,W], scalars [N,S], target [N]"
            )
        })?;
        serde_json::from_value(v.clone()).map_err(|e| bad_input!("{name}: tensor `{t}`: {e}"))
    }
}

impl Source for SafetensorsFile {
    fn info(&mut self, t: &str) -> anyhow::Result<Info> {
        let i = self.st_info(t)?;
        Ok(Info {
            dtype: i.dtype,
            shape: i.shape,
        })
    }

    fn head(&mut self, t: &str, bytes: usize) -> anyhow::Result<Vec<u8>> {
        let i = self.st_info(t)?;
        let name = &self.name;
        if i.data_offsets[1].saturating_sub(i.data_offsets[0]) < bytes as u64 {
            return Err(bad_input!(
                "{name}: tensor `{t}`: data shorter than its shape"
            ));
        }
        self.file
            .seek(SeekFrom::Start(self.body + i.data_offsets[0]))?;
        let mut buf = vec![0u8; bytes];
        self.file
            .read_exact(&mut buf)
            .map_err(|_| bad_input!("{name}: tensor `{t}`: file truncated"))?;
        Ok(buf)
    }
}

/// numpy's .npz: a zip of .npy files (stored or deflated); only the bytes
/// asked for are read (and inflated) from each entry.
struct NpzFile {
    name: String,
    zip: zip::ZipArchive<std::fs::File>,
}

impl NpzFile {
    fn open(path: &Path) -> anyhow::Result<NpzFile> {
        let name = path.display().to_string();
        let file = std::fs::File::open(path).map_err(|e| bad_input!("{name}: cannot open: {e}"))?;
        let zip = zip::ZipArchive::new(file)
            .map_err(|e| bad_input!("{name}: not an .npz (zip) file: {e}"))?;
        Ok(NpzFile { name, zip })
    }

    /// Opens `t.npy` and reads its header; the reader is left at the data.
    fn open_entry(
        &mut self,
        t: &str,
    ) -> anyhow::Result<(Info, zip::read::ZipFile<'_, std::fs::File>)> {
        let name = self.name.clone();
        let mut entry = self.zip.by_name(&format!("{t}.npy")).map_err(|_| {
            bad_input!(
                "{name}: no array `{t}`; expected frames [N,T,C,H,W], scalars [N,S], target [N]"
            )
        })?;
        let info = npy_header(&mut entry).map_err(|e| bad_input!("{name}: array `{t}`: {e}"))?;
        Ok((info, entry))
    }
}

impl Source for NpzFile {
    fn info(&mut self, t: &str) -> anyhow::Result<Info> {
        Ok(self.open_entry(t)?.0)
    }

    fn head(&mut self, t: &str, bytes: usize) -> anyhow::Result<Vec<u8>> {
        let name = self.name.clone();
        let (_, mut entry) = self.open_entry(t)?;
        let mut buf = vec![0u8; bytes];
        entry
            .read_exact(&mut buf)
            .map_err(|_| bad_input!("{name}: array `{t}`: data shorter than its shape"))?;
        Ok(buf)
    }
}

/// Reads the first `max` rows of `frames`, `scalars` and `target` from a
/// safetensors or .npz file, checking every shape and dtype against the
/// config first.
pub fn read_file(c: &Config, path: &Path, max: Option<u64>) -> anyhow::Result<Dataset> {
    let name = path.display().to_string();
    let mut src: Box<dyn Source> = match path.extension().and_then(|e| e.to_str()) {
        Some("npz") => Box::new(NpzFile::open(path)?),
        _ => Box::new(SafetensorsFile::open(path)?),
    };
    let (frames, scalars, target) = (
        src.info("frames")?,
        src.info("scalars")?,
        src.info("target")?,
    );
    let want = [
        c.temporal_frames as i64,
        c.image_channels as i64,
        c.image_size as i64,
        c.image_size as i64,
    ];
    if frames.shape.len() != 5 || frames.shape[1..] != want {
        return Err(bad_input!(
            "{name}: tensor `frames`: expected shape [N, {}, {}, {}, {}] (temporal_frames, image_channels, image_size, image_size), found {:?}",
            want[0], want[1], want[2], want[3], frames.shape
        ));
    }
    let n = frames.shape[0];
    if scalars.shape != [n, c.scalar_features as i64] {
        return Err(bad_input!(
            "{name}: tensor `scalars`: expected shape [{n}, {}] (scalar_features), found {:?}",
            c.scalar_features,
            scalars.shape
        ));
    }
    if target.shape != [n] {
        return Err(bad_input!(
            "{name}: tensor `target`: expected shape [{n}], found {:?}",
            target.shape
        ));
    }
    for (t, i) in [("frames", &frames), ("scalars", &scalars)] {
        if i.dtype != "F32" {
            return Err(bad_input!(
                "{name}: tensor `{t}`: expected dtype F32 (float32), found {}",
                i.dtype
            ));
        }
    }
    let (target_dtype, target_kind) = match c.task {
        Task::Regression => ("F32", Kind::Float),
        Task::Classification => ("I64", Kind::Int64),
    };
    if target.dtype != target_dtype {
        return Err(bad_input!(
            "{name}: tensor `target`: expected dtype {target_dtype} for task {:?}, found {}",
            c.task,
            target.dtype
        ));
    }
    let rows = max.map_or(n, |m| (m as i64).min(n));
    let mut read_rows = |t: &str, i: &Info, kind: Kind| -> anyhow::Result<Tensor> {
        let elem = crate::system::tensor_bytes::elem_bytes(kind) as i64;
        let row: i64 = i.shape[1..].iter().product::<i64>() * elem;
        let buf = src.head(t, (row * rows) as usize)?;
        let mut shape = i.shape.clone();
        shape[0] = rows;
        crate::system::tensor_bytes::from_le(&buf, &shape, kind)
            .map_err(|e| bad_input!("{name}: tensor `{t}`: {e}"))
    };
    Ok(Dataset {
        frames: read_rows("frames", &frames, Kind::Float)?,
        scalars: read_rows("scalars", &scalars, Kind::Float)?,
        target: read_rows("target", &target, target_kind)?,
    })
}

/// Examples per label in [0, k) of a classification target.
pub fn class_counts(target: &Tensor, k: i64) -> BTreeMap<i64, i64> {
    (0..k)
        .map(|label| (label, target.eq(label).sum(Kind::Int64).int64_value(&[])))
        .collect()
}

/// Seed 004's defensive data pass, before anything touches the GPU: no NaN
/// or inf in any tensor, labels in [0, num_labels). Returns the class
/// balance for classification.
pub fn check(c: &Config, d: &Dataset, which: &str) -> anyhow::Result<Option<BTreeMap<i64, i64>>> {
    let bad_at = |mask: Tensor| -> Option<i64> {
        let idx = mask.nonzero();
        (idx.size()[0] > 0).then(|| idx.int64_value(&[0, 0]))
    };
    let flat = |t: &Tensor| t.reshape([t.size()[0], -1]).to_kind(Kind::Float);
    for (name, t) in [("frames", &d.frames), ("scalars", &d.scalars)] {
        if t.numel() > 0 {
            if let Some(i) = bad_at(flat(t).isfinite().logical_not().any_dim(1, false)) {
                return Err(bad_input!(
                    "{which} data: tensor `{name}`: NaN or inf in example {i}"
                ));
            }
        }
    }
    match c.task {
        Task::Regression => {
            if let Some(i) = bad_at(d.target.isfinite().logical_not()) {
                return Err(bad_input!(
                    "{which} data: tensor `target`: NaN or inf in example {i}"
                ));
            }
            Ok(None)
        }
        Task::Classification => {
            let k = c.num_labels as i64;
            let counts = class_counts(&d.target, k);
            if let Some(i) = bad_at(d.target.lt(0).logical_or(&d.target.ge(k))) {
                return Err(bad_input!(
                    "{which} data: tensor `target`: label {} in example {i} is outside [0, {k}) (num_labels {k}); cross-entropy would raise a device-side assert on a GPU",
                    d.target.int64_value(&[i])
                ));
            }
            Ok(Some(counts))
        }
    }
}

/// A seeded permutation for one epoch (SplitMix64 + Fisher-Yates): the same
/// seed and epoch give the same order, on any machine, after any resume.
pub fn shuffled(n: usize, seed: u64, epoch: u64) -> Vec<i64> {
    let mut state = seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut idx: Vec<i64> = (0..n as i64).collect();
    for i in (1..n).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        idx.swap(i, j);
    }
    idx
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shuffle_is_a_seeded_permutation() {
        let a = shuffled(100, 7, 3);
        assert_eq!(a, shuffled(100, 7, 3));
        assert_ne!(a, shuffled(100, 7, 4));
        let mut s = a.clone();
        s.sort();
        assert_eq!(s, (0..100).collect::<Vec<_>>());
    }
}
